################################################################################
#
# netperfd
#
################################################################################

# Release tag or 40-hex commit of the netperfd repository (replace ORG).
# After changing it, regenerate the tarball line of netperfd.hash (see README.md).
NETPERFD_VERSION = v0.1.0
NETPERFD_SITE = https://github.com/ORG/netperf.git
NETPERFD_SITE_METHOD = git
NETPERFD_LICENSE = MIT
NETPERFD_LICENSE_FILES = LICENSE

# Size-optimised release build for the boards (rusqlite `bundled` compiles
# SQLite with the cross CC: no BR2_PACKAGE_SQLITE needed). Unwinding stays on.
NETPERFD_CARGO_ENV = \
	CARGO_PROFILE_RELEASE_OPT_LEVEL=s \
	CARGO_PROFILE_RELEASE_LTO=fat \
	CARGO_PROFILE_RELEASE_CODEGEN_UNITS=1

# Local checkout (NETPERFD_OVERRIDE_SRCDIR in local.mk): there is no download
# step, hence no vendoring by Buildroot. If the checkout has a VENDOR/
# directory (`cargo vendor --locked VENDOR`), point cargo at it.
NETPERFD_OVERRIDE_SRCDIR_RSYNC_EXCLUSIONS = --exclude target
ifneq ($(wildcard $(NETPERFD_OVERRIDE_SRCDIR)/VENDOR),)
NETPERFD_CARGO_VENDOR_OPTS = \
	--config 'source.crates-io.replace-with="vendored-sources"' \
	--config 'source.vendored-sources.directory="$(@D)/VENDOR"'
NETPERFD_CARGO_BUILD_OPTS += $(NETPERFD_CARGO_VENDOR_OPTS)
NETPERFD_CARGO_INSTALL_OPTS += $(NETPERFD_CARGO_VENDOR_OPTS)
endif

define NETPERFD_INSTALL_CONFIG
	$(INSTALL) -D -m 0640 $(@D)/systemd/netperfd.toml \
		$(TARGET_DIR)/etc/netperfd/netperfd.toml
endef
NETPERFD_POST_INSTALL_TARGET_HOOKS += NETPERFD_INSTALL_CONFIG

define NETPERFD_PERMISSIONS
	/etc/netperfd/netperfd.toml f 640 root netperfd - - - - -
endef

# Enabled by `systemctl preset-all` (the unit has an [Install] section).
define NETPERFD_INSTALL_INIT_SYSTEMD
	$(INSTALL) -D -m 0644 $(NETPERFD_PKGDIR)/netperfd.service \
		$(TARGET_DIR)/usr/lib/systemd/system/netperfd.service
endef

define NETPERFD_USERS
	netperfd -1 netperfd -1 * /var/lib/netperfd - - netperf daemon
endef

$(eval $(cargo-package))
