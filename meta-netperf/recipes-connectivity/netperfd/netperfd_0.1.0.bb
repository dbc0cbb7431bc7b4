SUMMARY = "netperf network performance test daemon with a web UI"
DESCRIPTION = "netperfd runs iperf3-compatible network tests on an embedded Linux board, serves a web UI and keeps the test history in SQLite."
HOMEPAGE = "https://github.com/ORG/netperf"
BUGTRACKER = "https://github.com/ORG/netperf/issues"
SECTION = "net"
# netperfd is MIT; the binary statically links crates under Apache-2.0, BSD-3-Clause, ISC,
# Unicode-3.0, Zlib and MIT, and the bundled SQLite (public domain). Per-crate list and
# the license texts: LICENSE-THIRD-PARTY (scripts/third-party-licenses.py --check in CI).
# oe-core master (from 2026-07) parses LICENSE as an SPDX expression and warns about the
# legacy operators; older releases know only the legacy form. Feature test, not a branch name.
# (The SPDX form is the one oe-core's parser prints for it, checked with oe.spdx_license.)
# nooelint: oelint.vars.mispell.unknown
NETPERF_LICENSE_AMPERSANDS = "MIT & Apache-2.0 & BSD-3-Clause & ISC & Unicode-3.0 & Zlib & PD"
NETPERF_LICENSE_SPDX = "Apache-2.0 AND BSD-3-Clause AND ISC AND MIT AND Unicode-3.0 AND Zlib AND LicenseRef-PD"
LICENSE = "${@d.getVar('NETPERF_LICENSE_SPDX') if hasattr(oe.license, 'convert_legacy_license_to_spdx') else d.getVar('NETPERF_LICENSE_AMPERSANDS')}"
# LICENSE-THIRD-PARTY: every crate's notice, so the image's license manifest carries them.
LIC_FILES_CHKSUM = "file://LICENSE;md5=6e01131aea56f24df0c7ad5be6e93e15 \
                    file://LICENSE-THIRD-PARTY;md5=92b3fd2a2ee99c2e47b28f94f9e77acf \
                    file://LICENSES/Unicode-3.0.txt;md5=9541a35d720222b4579e8c8fb11a95ef \
                    "
# Older oe-core releases have no common-licenses/Unicode-3.0.
NO_GENERIC_LICENSE[Unicode-3.0] = "LICENSES/Unicode-3.0.txt"

# Replace ORG and SRCREV with the release repository and commit. Cargo.lock of that
# commit must match netperfd-crates.inc (scripts/gen-crates-inc.py --check).
# destsuffix=${BP}: the checkout lands where S points by default on every release
# (scarthgap: ${WORKDIR}/${BP}; whinlatter/wrynose: ${UNPACKDIR}/${BP}), so no S line,
# which would be fatal at unpack on whinlatter and later.
SRC_URI = "git://github.com/ORG/netperf.git;protocol=https;branch=main;destsuffix=${BP} \
           file://netperfd.service \
           file://netperfd.toml \
           file://netperfd-tmpfiles.conf \
           file://netperfd-modules.conf \
           "
SRCREV = "0000000000000000000000000000000000000000"

# Needs Rust >= 1.85: stock on whinlatter/wrynose, meta-lts-mixins scarthgap/rust on scarthgap.
# Refused at parse time with stock scarthgap (1.75) instead of failing at compile time.
NETPERF_MIN_RUST = "1.85"
# A parse-time check is the point here (SkipRecipe names the fix).
# nooelint: oelint.task.noanonpython
python () {
    rv = d.getVar('RUSTVERSION') or ''
    if rv and bb.utils.vercmp_string_op(rv, d.getVar('NETPERF_MIN_RUST'), '<'):
        raise bb.parse.SkipRecipe('netperfd needs Rust >= %s, this build has RUSTVERSION %s: '
                                  'add meta-lts-mixins (branch scarthgap/rust) or use wrynose' %
                                  (d.getVar('NETPERF_MIN_RUST'), rv))
}

inherit cargo systemd useradd
# kirkstone has no cargo-update-recipe-crates class (the mixin may bring it).
# The expansion is empty on kirkstone, which oelint reads as a trailing space (false positive).
# nooelint: oelint.spaces.lineend
inherit ${@bb.utils.contains('LAYERSERIES_CORENAMES', 'kirkstone', '', 'cargo-update-recipe-crates', d)}

require ${BPN}-crates.inc

# One binary everywhere (docs/build-settings.md; scripts/check-build-envs.py builds with this
# recipe's cargo environment in CI and requires the same binary as a plain release build):
# * oe-core strips the binary itself and moves the symbols into ${PN}-dbg; one that rustc
#   already stripped (strip = true in Cargo.toml) stops do_package with the already-stripped
#   QA error on every release. This is the only override of Cargo.toml's [profile.release]
#   (scripts/check-packaging.sh; scripts/yocto-qa.py runs oe-core's QA on the result in CI).
CARGO_BUILD_FLAGS:append = " --config profile.release.strip=false"
# * cargo runs in ${B}, outside the source tree, so .cargo/config.toml's [env] is never read:
#   the bundled SQLite's options are restated here (check-packaging.sh compares the two).
export LIBSQLITE3_FLAGS = "-USQLITE_ENABLE_FTS3 -USQLITE_ENABLE_FTS3_PARENTHESIS -USQLITE_ENABLE_FTS5 -USQLITE_ENABLE_RTREE -USQLITE_ENABLE_DBSTAT_VTAB -USQLITE_ENABLE_STAT4 -USQLITE_SOUNDEX -USQLITE_ENABLE_COLUMN_METADATA -USQLITE_ENABLE_LOAD_EXTENSION -DSQLITE_OMIT_LOAD_EXTENSION -DSQLITE_OMIT_SHARED_CACHE -DSQLITE_OMIT_DEPRECATED -DSQLITE_OMIT_PROGRESS_CALLBACK"
# * oe-core master (from 2026-08) exports LIBSQLITE3_SYS_USE_PKG_CONFIG=1 in oe_cargo_fix_env,
#   which would link the image's libsqlite3 instead of the bundled SQLite built with the
#   options above: keep the bundled one on every release.
oe_cargo_fix_env:append() {
    unset LIBSQLITE3_SYS_USE_PKG_CONFIG
}

# iptables (default) or nftables (meta-networking) for the forwarding/NAT rules. The daemon
# talks rtnetlink itself and never runs ip (iproute2). The netfilter modules are loaded at
# boot by ${nonarch_libdir}/modules-load.d/netperfd.conf (or build them into the kernel).
NETPERF_FIREWALL ??= "iptables"
FILES:${PN} += "${nonarch_libdir}/tmpfiles.d/netperfd.conf ${nonarch_libdir}/modules-load.d/netperfd.conf"
# The iptables extensions the rules use (-j MASQUERADE, -m conntrack, -m comment; iptables and
# iptables-nft alike): the iptables recipe only recommends its modules, and an image with
# NO_RECOMMENDATIONS or BAD_RECOMMENDATIONS would lack them (NAT fails at run time).
NETPERF_FIREWALL_EXTENSIONS = "${@'iptables-module-xt-masquerade iptables-module-xt-conntrack iptables-module-xt-comment' if d.getVar('NETPERF_FIREWALL') == 'iptables' else ''}"
RDEPENDS:${PN} += "${NETPERF_FIREWALL_EXTENSIONS} ${NETPERF_FIREWALL}"

# Argon2id hash of the web UI admin password (`netperfd hash-password`). When set, it is
# written into ${sysconfdir}/netperfd/netperfd.toml; when empty the example stays commented.
NETPERF_ADMIN_PASSWORD_HASH ??= ""

SYSTEMD_SERVICE:${PN} = "netperfd.service"
SYSTEMD_AUTO_ENABLE:${PN} = "enable"

USERADD_PACKAGES = "${PN}"
# Group systemd-journal (made by systemd's recipe; made here too when this package's
# preinstall runs first: useradd.bbclass skips a group that exists) lets the daemon read its
# own unit's journal for Diagnostics → journal (journalctl: "insufficient permissions" otherwise).
GROUPADD_PARAM:${PN} = "--system systemd-journal"
USERADD_PARAM:${PN} = "--system --no-create-home --home-dir ${localstatedir}/lib/netperfd --shell /sbin/nologin --user-group --groups systemd-journal netperfd"

# file:// sources are in ${WORKDIR} up to scarthgap and in ${UNPACKDIR} from styhead on.
# Read-only expression: never set UNPACKDIR itself (fatal from styhead on).
UNPACKDIR_COMPAT = "${@d.getVar('UNPACKDIR') or d.getVar('WORKDIR')}"

# cargo_do_install installs the netperfd binary into ${bindir}.
do_install:append() {
    install -d ${D}${systemd_system_unitdir}
    install -m 0644 ${UNPACKDIR_COMPAT}/netperfd.service ${D}${systemd_system_unitdir}/
    install -d -m 0755 ${D}${sysconfdir}/netperfd
    install -m 0640 -g netperfd ${UNPACKDIR_COMPAT}/netperfd.toml ${D}${sysconfdir}/netperfd/netperfd.toml
    # group netperfd may write scaling_governor (CPU governor from the web UI)
    install -D -m 0644 ${UNPACKDIR_COMPAT}/netperfd-tmpfiles.conf ${D}${nonarch_libdir}/tmpfiles.d/netperfd.conf
    # netfilter modules: the unit's ProtectKernelModules=yes stops on-demand loading
    install -D -m 0644 ${UNPACKDIR_COMPAT}/netperfd-modules.conf ${D}${nonarch_libdir}/modules-load.d/netperfd.conf
    # the first start's setup code above the console's login prompt: agetty reads
    # /etc/issue.d/, the daemon writes the file in its RuntimeDirectory (netperfd.toml)
    install -d -m 0755 ${D}${sysconfdir}/issue.d
    ln -sf ${runtimedir}/netperfd/setup.issue ${D}${sysconfdir}/issue.d/netperfd.issue
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
