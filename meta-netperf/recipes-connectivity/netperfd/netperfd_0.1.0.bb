SUMMARY = "netperf network performance test daemon with a web UI"
DESCRIPTION = "netperfd runs iperf3-compatible network tests on an embedded Linux board, serves a web UI and keeps the test history in SQLite."
HOMEPAGE = "https://github.com/ORG/netperf"
BUGTRACKER = "https://github.com/ORG/netperf/issues"
SECTION = "net"
LICENSE = "MIT"
LIC_FILES_CHKSUM = "file://LICENSE;md5=6e01131aea56f24df0c7ad5be6e93e15"

# Replace ORG and SRCREV with the release repository and commit. Cargo.lock of that
# commit must match netperfd-crates.inc (scripts/gen-crates-inc.py --check).
SRC_URI = "git://github.com/ORG/netperf.git;protocol=https;branch=main \
           file://netperfd.service \
           file://netperfd.toml \
           "
SRCREV = "0000000000000000000000000000000000000000"
# kirkstone .. walnascar; drop on whinlatter and later (git unpacks to ${UNPACKDIR}/${BP}).
S = "${WORKDIR}/git"

# Needs Rust >= 1.85: stock on whinlatter/wrynose, meta-lts-mixins scarthgap/rust on scarthgap.
inherit cargo systemd useradd
# kirkstone has no cargo-update-recipe-crates class (the mixin may bring it).
# The expansion is empty on kirkstone, which oelint reads as a trailing space (false positive).
# nooelint: oelint.spaces.lineend
inherit ${@bb.utils.contains('LAYERSERIES_CORENAMES', 'kirkstone', '', 'cargo-update-recipe-crates', d)}

require ${BPN}-crates.inc

# iptables (default) or nftables (meta-networking) for the forwarding/NAT rules; ip from iproute2.
NETPERF_FIREWALL ??= "iptables"
RDEPENDS:${PN} += "${NETPERF_FIREWALL} iproute2"

# Argon2id hash of the web UI admin password (`netperfd hash-password`). When set, it is
# written into ${sysconfdir}/netperfd/netperfd.toml; when empty the example stays commented.
NETPERF_ADMIN_PASSWORD_HASH ??= ""

SYSTEMD_SERVICE:${PN} = "netperfd.service"
SYSTEMD_AUTO_ENABLE:${PN} = "enable"

USERADD_PACKAGES = "${PN}"
USERADD_PARAM:${PN} = "--system --no-create-home --home-dir ${localstatedir}/lib/netperfd --shell /sbin/nologin --user-group netperfd"

# file:// sources are in ${WORKDIR} up to scarthgap and in ${UNPACKDIR} from styhead on.
# Read-only expression: never set UNPACKDIR itself (fatal from styhead on).
UNPACKDIR_COMPAT = "${@d.getVar('UNPACKDIR') or d.getVar('WORKDIR')}"

# cargo_do_install installs the netperfd binary into ${bindir}.
do_install:append() {
    install -d ${D}${systemd_system_unitdir}
    install -m 0644 ${UNPACKDIR_COMPAT}/netperfd.service ${D}${systemd_system_unitdir}/
    install -d -m 0755 ${D}${sysconfdir}/netperfd
    install -m 0640 -g netperfd ${UNPACKDIR_COMPAT}/netperfd.toml ${D}${sysconfdir}/netperfd/netperfd.toml
}

python netperfd_set_password_hash() {
    import re
    pw_hash = d.getVar('NETPERF_ADMIN_PASSWORD_HASH') or ''
    if not pw_hash:
        return
    # PHC string of Argon2: '$argon2id$v=19$m=...,t=...,p=...$salt$hash' (no quotes or spaces).
    if not re.fullmatch(r'\$argon2(id|i|d)\$[A-Za-z0-9+/=,.$-]+', pw_hash):
        bb.fatal('NETPERF_ADMIN_PASSWORD_HASH is not an Argon2 PHC string; generate it with `netperfd hash-password`')
    conf = os.path.join(d.getVar('D') + d.getVar('sysconfdir'), 'netperfd', 'netperfd.toml')
    with open(conf) as f:
        lines = f.read().splitlines()
    line = 'admin_password_hash = "%s"' % pw_hash
    # Replace the (commented) example line in place, else append.
    idx = [i for i, l in enumerate(lines) if re.match(r'#?\s*admin_password_hash\s*=', l)]
    if idx:
        lines[idx[0]] = line
        lines = [l for i, l in enumerate(lines) if i not in idx[1:]]
    else:
        lines.append(line)
    with open(conf, 'w') as f:
        f.write('\n'.join(lines) + '\n')
}
do_install[postfuncs] += "netperfd_set_password_hash"
do_install[vardeps] += "NETPERF_ADMIN_PASSWORD_HASH"

CONFFILES:${PN} = "${sysconfdir}/netperfd/netperfd.toml"
