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
# netperfd is MIT; the binary statically links crates under these licenses and the
# bundled SQLite (public domain). Per-crate list and texts: LICENSE-THIRD-PARTY.
NETPERFD_LICENSE = MIT, Apache-2.0, BSD-3-Clause, ISC, Unicode-3.0, Zlib, Public Domain (SQLite)
NETPERFD_LICENSE_FILES = LICENSE LICENSE-THIRD-PARTY LICENSES/Unicode-3.0.txt

# Rust >= 1.85 (rust-version of Cargo.toml): stop before building anything with an older
# host-rustc (Buildroot 2025.02 has 1.82) instead of failing in the middle of the compile.
NETPERFD_RUST_VERSION = $(if $(BR2_PACKAGE_HOST_RUST),$(RUST_VERSION),$(RUST_BIN_VERSION))
ifeq ($(BR2_PACKAGE_NETPERFD)$(BR_BUILDING),yy)
ifneq ($(firstword $(shell printf '%s\n' 1.85.0 $(NETPERFD_RUST_VERSION) | sort -V)),1.85.0)
$(error netperfd needs Rust >= 1.85, this Buildroot has host-rustc $(NETPERFD_RUST_VERSION): use Buildroot 2025.05 or newer)
endif
endif

# Build settings: Buildroot's cargo infrastructure (package/pkg-cargo.mk) exports
# CARGO_PROFILE_RELEASE_{OPT_LEVEL,LTO,CODEGEN_UNITS} from BR2_OPTIMIZE_*, BR2_ENABLE_LTO and
# its own default (16 codegen units), and the environment beats Cargo.toml. So the values of
# Cargo.toml's [profile.release] that decide the binary are restated here (they come after
# Buildroot's in the environment, so they win), and STRIP=false: Buildroot strips target
# binaries itself (BR2_STRIP_strip) or keeps the symbols for debugging (BR2_STRIP_none), as
# Yocto does. scripts/check-packaging.sh requires these to equal Cargo.toml, and
# scripts/check-build-envs.py builds with this environment in CI and requires the same binary
# as a plain release build (docs/build-settings.md).
NETPERFD_CARGO_ENV = \
	CARGO_PROFILE_RELEASE_OPT_LEVEL=z \
	CARGO_PROFILE_RELEASE_LTO=fat \
	CARGO_PROFILE_RELEASE_CODEGEN_UNITS=1 \
	CARGO_PROFILE_RELEASE_STRIP=false

# Local checkout (NETPERFD_OVERRIDE_SRCDIR, as the shipped defconfigs set through
# local.mk): there is no download step, hence no vendoring by Buildroot. cargo then reads
# the crates from $(@D)/VENDOR: the checkout's own VENDOR/ (`cargo vendor --locked VENDOR`,
# for offline builds), else `cargo vendor` fetches them before the build (needs network).
NETPERFD_OVERRIDE_SRCDIR_RSYNC_EXCLUSIONS = --exclude target
ifneq ($(NETPERFD_OVERRIDE_SRCDIR),)
NETPERFD_CARGO_VENDOR_OPTS = \
	--config 'source.crates-io.replace-with="vendored-sources"' \
	--config 'source.vendored-sources.directory="$(@D)/VENDOR"'
NETPERFD_CARGO_BUILD_OPTS += $(NETPERFD_CARGO_VENDOR_OPTS)
NETPERFD_CARGO_INSTALL_OPTS += $(NETPERFD_CARGO_VENDOR_OPTS)
define NETPERFD_VENDOR_CRATES
	if [ ! -d $(@D)/VENDOR ]; then \
		cd $(@D) && $(PKG_CARGO_ENV) $(HOST_DIR)/bin/cargo vendor --locked VENDOR >/dev/null; \
	fi
endef
NETPERFD_PRE_BUILD_HOOKS += NETPERFD_VENDOR_CRATES
endif

define NETPERFD_INSTALL_CONFIG
	$(INSTALL) -D -m 0640 $(@D)/systemd/netperfd.toml \
		$(TARGET_DIR)/etc/netperfd/netperfd.toml
	$(INSTALL) -D -m 0644 $(@D)/systemd/netperfd-tmpfiles.conf \
		$(TARGET_DIR)/usr/lib/tmpfiles.d/netperfd.conf
	$(INSTALL) -D -m 0644 $(@D)/systemd/netperfd-modules.conf \
		$(TARGET_DIR)/usr/lib/modules-load.d/netperfd.conf
	$(INSTALL) -d -m 0755 $(TARGET_DIR)/etc/issue.d
	ln -sf /run/netperfd/setup.issue $(TARGET_DIR)/etc/issue.d/netperfd.issue
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

# Kernel options for forwarding with NAT through nftables, iptables-nft and iptables-legacy
# (the unit's ProtectKernelModules=yes: modules are loaded at boot by modules-load.d).
define NETPERFD_LINUX_CONFIG_FIXUPS
	$(call KCONFIG_ENABLE_OPT,CONFIG_NETFILTER)
	$(call KCONFIG_ENABLE_OPT,CONFIG_NETFILTER_ADVANCED)
	$(call KCONFIG_ENABLE_OPT,CONFIG_NF_CONNTRACK)
	$(call KCONFIG_ENABLE_OPT,CONFIG_NF_NAT)
	$(call KCONFIG_ENABLE_OPT,CONFIG_NF_TABLES)
	$(call KCONFIG_ENABLE_OPT,CONFIG_NF_TABLES_INET)
	$(call KCONFIG_ENABLE_OPT,CONFIG_NF_TABLES_IPV4)
	$(call KCONFIG_ENABLE_OPT,CONFIG_NF_TABLES_IPV6)
	$(call KCONFIG_ENABLE_OPT,CONFIG_NFT_CT)
	$(call KCONFIG_ENABLE_OPT,CONFIG_NFT_NAT)
	$(call KCONFIG_ENABLE_OPT,CONFIG_NFT_MASQ)
	$(call KCONFIG_ENABLE_OPT,CONFIG_NFT_COMPAT)
	$(call KCONFIG_ENABLE_OPT,CONFIG_NETFILTER_XTABLES)
	$(call KCONFIG_ENABLE_OPT,CONFIG_NETFILTER_XT_MATCH_COMMENT)
	$(call KCONFIG_ENABLE_OPT,CONFIG_NETFILTER_XT_MATCH_CONNTRACK)
	$(call KCONFIG_ENABLE_OPT,CONFIG_NETFILTER_XT_TARGET_MASQUERADE)
	$(call KCONFIG_ENABLE_OPT,CONFIG_IP_NF_IPTABLES)
	$(call KCONFIG_ENABLE_OPT,CONFIG_IP_NF_IPTABLES_LEGACY)
	$(call KCONFIG_ENABLE_OPT,CONFIG_IP_NF_FILTER)
	$(call KCONFIG_ENABLE_OPT,CONFIG_IP_NF_NAT)
	$(call KCONFIG_ENABLE_OPT,CONFIG_IP_NF_TARGET_MASQUERADE)
	$(call KCONFIG_ENABLE_OPT,CONFIG_IP6_NF_IPTABLES)
	$(call KCONFIG_ENABLE_OPT,CONFIG_IP6_NF_FILTER)
	$(call KCONFIG_ENABLE_OPT,CONFIG_IP6_NF_NAT)
	$(call KCONFIG_ENABLE_OPT,CONFIG_IP6_NF_TARGET_MASQUERADE)
endef

# Supplementary group systemd-journal (mkusers makes a missing group): Diagnostics → journal
# reads the unit's journal with journalctl, which needs it.
define NETPERFD_USERS
	netperfd -1 netperfd -1 * /var/lib/netperfd - systemd-journal netperf daemon
endef

$(eval $(cargo-package))
