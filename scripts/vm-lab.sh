#!/usr/bin/env bash
# scripts/vm-lab.sh — run a case script inside a throw-away VM whose kernel has what this
# host's kernel may lack (netem, fq, etf as modules): Debian's own kernel (the
# linux-image-*-amd64 package of this Debian 12 host, fetched with `apt-get download`,
# unpacked with `dpkg-deb -x` into a cache; never installed on the host) booted by
# qemu-system-x86_64 (TCG: no KVM needed) with a busybox initramfs built here.
#
# The initramfs carries busybox, iproute2's ip and tc, tcpdump, stock iperf3 and the
# netperfd binary under test, each with the shared libraries ldd lists, the kernel modules
# veth, sch_netem, sch_prio, sch_fq, sch_etf, sch_tbf, cls_u32 (decompressed when the
# package ships them compressed; busybox insmod loads them at boot), and the case script.
# Its /init mounts /proc /sys /dev /tmp /run, loads the modules, runs the case script with
# /out as its working directory (a tmpfs), and sends /out back as a base64 tar between
# marker lines on the second serial port (the first is the kernel console), then powers
# off. The host unpacks it into OUTDIR and adds:
#   OUTDIR/case.log    the case script's stdout and stderr
#   OUTDIR/case.rc     its exit status
#   OUTDIR/vm.json     {"boot_s": guest uptime when /init started, "wall_s": qemu's whole
#                       run, "kernel": package, "case_rc": N}
#   OUTDIR/console.log the kernel console (ttyS0)
# Inside the VM the case script finds: netperfd, iperf3, ip, tc, tcpdump and busybox's
# applets on PATH; VMLAB_MODULES lists the modules that loaded.
#
# Usage: scripts/vm-lab.sh NETPERFD CASE_SCRIPT OUTDIR
#        scripts/vm-lab.sh --fetch        (only fetch and unpack the kernel; prints its dir)
# Environment:
#   VMLAB_CACHE        cache directory (default /var/cache/netperfd-vm-lab): the kernel
#                      package's .deb and its unpacked kernel + modules, per package name
#   VMLAB_KERNEL_PKG   kernel package (default: what linux-image-amd64 depends on, e.g.
#                      linux-image-6.1.0-57-amd64; offline, the newest one cached)
#   VMLAB_MEM          guest memory (default 768M), VMLAB_SMP vCPUs (default 1)
#   VMLAB_TIMEOUT      seconds before qemu is killed (default 300)
#   VMLAB_KEEP=1       keep the work directory (initramfs tree, initrd.cpio) for debugging
# Exit status: 0 when the VM booted, ran the case script and returned its results (whatever
# the case script's own exit status: see OUTDIR/case.rc); 1 when it could not (no kernel,
# no qemu, no results); 2 on bad usage.
# Needs: qemu-system-x86 (qemu-system-x86_64), busybox, iproute2, iperf3, tcpdump, apt-get,
# dpkg-deb; network access to a Debian mirror the first time (the kernel is cached).
set -euo pipefail

cache=${VMLAB_CACHE:-/var/cache/netperfd-vm-lab}
mem=${VMLAB_MEM:-768M}
smp=${VMLAB_SMP:-1}
timeout_s=${VMLAB_TIMEOUT:-300}
log() { echo "vm-lab: $*" >&2; }
die() { log "FAILED: $*"; exit 1; }

# Modules the cases may load, in load order (none of them depends on another; checked below).
modules=(veth sch_prio cls_u32 sch_netem sch_tbf sch_fq sch_etf)

# extract_vmlinux BZIMAGE OUT: the ELF kernel inside a bzImage (the first compressed stream
# that unpacks to an ELF file), as the kernel's own scripts/extract-vmlinux finds it.
extract_vmlinux() {
    local img=$1 out=$2 kind magic tool off
    for kind in xz zstd gzip; do
        case $kind in
            xz) magic=$'\xfd7zXZ' tool=(xz -dc) ;;
            zstd) magic=$'\x28\xb5\x2f\xfd' tool=(zstd -qdc) ;;
            gzip) magic=$'\x1f\x8b\x08' tool=(gzip -dc) ;;
        esac
        for off in $(LC_ALL=C grep -abo "$magic" "$img" 2>/dev/null | cut -d: -f1 | head -n 3); do
            tail -c "+$((off + 1))" "$img" | "${tool[@]}" >"$out" 2>/dev/null || true
            if [[ $(head -c 4 "$out" | od -An -c | tr -d ' ') == '177ELF' ]]; then
                return 0
            fi
        done
    done
    rm -f "$out"
    return 1
}

# kernel_dir: prints the cache directory of the kernel (vmlinuz + modules/*.ko), fetching
# and unpacking the package when it is not cached yet.
kernel_dir() {
    local pkg=${VMLAB_KERNEL_PKG:-}
    if [[ -z $pkg ]]; then
        pkg=$(apt-cache depends linux-image-amd64 2>/dev/null |
            awk '/Depends: linux-image-[0-9]/ {print $2; exit}' || true)
    fi
    if [[ -z $pkg ]]; then
        # No package index (offline): the newest kernel already cached.
        pkg=$(find "$cache/kernel" -mindepth 1 -maxdepth 1 -type d -printf '%f\n' 2>/dev/null | sort -V | tail -n 1 || true)
        [[ -n $pkg ]] || die "no linux-image-amd64 in the package index (run apt-get update) and none cached in $cache"
        log "no package index: using cached $pkg"
    fi
    [[ $pkg =~ ^linux-image-[0-9][A-Za-z0-9.+~-]*$ ]] || die "not a kernel package name: $pkg"
    local dir=$cache/kernel/$pkg
    if [[ -s $dir/vmlinuz && -f $dir/.complete ]]; then
        echo "$dir"
        return
    fi
    mkdir -p "$cache/debs"
    local deb
    deb=$(find "$cache/debs" -maxdepth 1 -name "${pkg}_*_amd64.deb" | sort -V | tail -n 1)
    if [[ -z $deb ]]; then
        log "fetching $pkg (apt-get download)"
        (cd "$cache/debs" && apt-get -q -o APT::Sandbox::User=root download "$pkg" >&2) ||
            die "apt-get download $pkg failed"
        deb=$(find "$cache/debs" -maxdepth 1 -name "${pkg}_*_amd64.deb" | sort -V | tail -n 1)
        [[ -n $deb ]] || die "apt-get download left no ${pkg}_*_amd64.deb in $cache/debs"
    fi
    local tmp
    tmp=$(mktemp -d "$cache/unpack.XXXXXX")
    dpkg-deb -x "$deb" "$tmp/root" || { rm -rf "$tmp"; die "dpkg-deb -x $deb failed"; }
    rm -rf "$dir"
    mkdir -p "$dir/modules"
    local vmlinuz
    vmlinuz=$(find "$tmp/root/boot" -name 'vmlinuz-*' | head -n 1)
    [[ -n $vmlinuz ]] || { rm -rf "$tmp"; die "no /boot/vmlinuz-* in $deb"; }
    cp "$vmlinuz" "$dir/vmlinuz"
    # The uncompressed ELF vmlinux boots through its PVH entry (qemu -kernel reads the ELF
    # note): under TCG, the bzImage's own xz decompression took ~9 s of a ~16 s boot.
    extract_vmlinux "$dir/vmlinuz" "$dir/vmlinux" || log "no vmlinux extracted: booting the bzImage (slower)"
    local m f
    for m in "${modules[@]}"; do
        f=$(find "$tmp/root/lib/modules" "$tmp/root/usr/lib/modules" -name "$m.ko*" 2>/dev/null | head -n 1 || true)
        [[ -n $f ]] || { log "no module $m in $pkg (built in or absent)"; continue; }
        case $f in
            *.ko) cp "$f" "$dir/modules/$m.ko" ;;
            *.ko.xz) xz -dc "$f" >"$dir/modules/$m.ko" ;;
            *.ko.zst) zstd -qdc "$f" >"$dir/modules/$m.ko" ;;
            *.ko.gz) gzip -dc "$f" >"$dir/modules/$m.ko" ;;
            *) log "unknown module compression: $f"; continue ;;
        esac
        # busybox insmod does not resolve dependencies: the list above must be complete.
        local deps
        deps=$(tr '\0' '\n' <"$dir/modules/$m.ko" | sed -n 's/^depends=//p' | head -n 1)
        [[ -z $deps ]] || log "module $m depends on $deps (add it to the list before $m)"
    done
    rm -rf "$tmp"
    touch "$dir/.complete"
    log "kernel $pkg unpacked into $dir ($(du -sh "$dir" | cut -f1))"
    echo "$dir"
}

if [[ ${1:-} == --fetch ]]; then
    kernel_dir
    exit 0
fi
[[ $# -eq 3 ]] || { echo "usage: $0 NETPERFD CASE_SCRIPT OUTDIR | $0 --fetch" >&2; exit 2; }
netperfd=$1 case_script=$2 out=$3
[[ -f $netperfd && -x $netperfd ]] || { echo "vm-lab: not an executable: $netperfd" >&2; exit 2; }
[[ -f $case_script ]] || { echo "vm-lab: no such case script: $case_script" >&2; exit 2; }
command -v qemu-system-x86_64 >/dev/null || die "qemu-system-x86_64 missing (apt-get install qemu-system-x86)"
for t in busybox ip tc iperf3 tcpdump; do
    command -v "$t" >/dev/null || die "$t missing on the host (it is copied into the VM)"
done

kdir=$(kernel_dir)
mkdir -p "$out"
work=$(mktemp -d /tmp/vm-lab.XXXXXX)
qpid=
cleanup() {
    [[ -z $qpid ]] || kill "$qpid" 2>/dev/null || true
    if [[ -n ${VMLAB_KEEP:-} ]]; then log "kept $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT

# ---- the initramfs
root=$work/root
mkdir -p "$root"/{bin,sbin,lib,lib64,proc,sys,dev,tmp,run,out,etc,modules,usr/lib/x86_64-linux-gnu/tc}
cp "$(command -v busybox)" "$root/bin/busybox"
for a in $("$root/bin/busybox" --list); do
    [[ -e $root/bin/$a ]] || ln -s busybox "$root/bin/$a"
done
# netperfd without symbols (a debug build is ~100 MB; the initramfs is copied into RAM).
if command -v strip >/dev/null; then
    strip -o "$root/bin/netperfd" "$netperfd"
else
    cp "$netperfd" "$root/bin/netperfd"
fi
bins=("$root/bin/netperfd" "$(command -v iperf3)" "$(command -v ip)" "$(command -v tc)" "$(command -v tcpdump)" "$(command -v busybox)")
for b in "${bins[@]:1:4}"; do rm -f "$root/bin/${b##*/}"; cp "$b" "$root/bin/"; done
# Shared libraries of every binary, at the paths ldd names (the loader at its own path too).
for b in "${bins[@]}"; do
    ldd "$b" | awk '/=> \// {print $3} /^\t\/[^ ]*ld-linux/ {print $1}'
done | sort -u | while read -r lib; do
    mkdir -p "$root$(dirname "$lib")"
    cp -L "$lib" "$root$lib"
done
cp /usr/lib/x86_64-linux-gnu/tc/*.dist "$root/usr/lib/x86_64-linux-gnu/tc/" 2>/dev/null || true
cp "$kdir"/modules/*.ko "$root/modules/" 2>/dev/null || true
printf '%s\n' "${modules[@]}" >"$root/modules/order"
echo 'root:x:0:0:root:/:/bin/sh' >"$root/etc/passwd"
echo 'root:x:0:' >"$root/etc/group"
cp "$case_script" "$root/case.sh"
cat >"$root/init" <<'EOF'
#!/bin/sh
export PATH=/bin:/sbin
mkdir -p /var && ln -s /run /var/run
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mount -t tmpfs tmp /tmp
mount -t tmpfs run /run
mount -t tmpfs out /out
read up _ </proc/uptime
echo "$up" >/out/boot_s
VMLAB_MODULES=
while read -r m; do
    [ -f /modules/$m.ko ] && insmod /modules/$m.ko && VMLAB_MODULES="$VMLAB_MODULES $m"
done </modules/order
export VMLAB_MODULES
ip link set lo up
cd /out
sh /case.sh >/out/case.log 2>&1
echo $? >/out/case.rc
stty -F /dev/ttyS1 raw -echo 2>/dev/null
{ echo "==VMLAB-BEGIN=="; tar -C /out -cf - . | base64; echo "==VMLAB-END=="; } >/dev/ttyS1
sync
poweroff -f
EOF
chmod +x "$root/init" "$root/case.sh"
(cd "$root" && find . | busybox cpio -o -H newc 2>/dev/null) >"$work/initrd.cpio"
log "initramfs $(du -h "$work/initrd.cpio" | cut -f1), kernel $(basename "$kdir")"

# ---- boot
kernel=$kdir/vmlinux
[[ -s $kernel ]] || kernel=$kdir/vmlinuz
t0=$(date +%s.%N)
timeout --signal=KILL "$timeout_s" qemu-system-x86_64 -accel tcg -cpu max -m "$mem" -smp "$smp" -nodefaults -display none \
    -no-reboot -kernel "$kernel" -initrd "$work/initrd.cpio" \
    -append "console=ttyS0 rdinit=/init panic=-1 quiet loglevel=4 mitigations=off" \
    -serial "file:$out/console.log" -serial "file:$work/results.txt" &
qpid=$!
rc=0
wait "$qpid" || rc=$?
qpid=
t1=$(date +%s.%N)
((rc == 0)) || die "qemu exited with $rc (137: killed after VMLAB_TIMEOUT=${timeout_s} s); console: $(tail -n 20 "$out/console.log" 2>/dev/null)"
sed -n '/==VMLAB-BEGIN==/,/==VMLAB-END==/p' "$work/results.txt" | tr -d '\r' |
    grep -v '^==VMLAB-' | base64 -d | tar -xf - -C "$out" ||
    die "no results from the VM; console: $(tail -n 20 "$out/console.log" 2>/dev/null)"
[[ -f $out/case.rc ]] || die "the VM sent no case.rc"
boot=$(cat "$out/boot_s")
wall=$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.1f", b - a}')
printf '{"boot_s": %s, "wall_s": %s, "kernel": "%s", "case_rc": %s}\n' "$boot" "$wall" \
    "$(basename "$kdir")" "$(cat "$out/case.rc")" >"$out/vm.json"
log "booted in $boot s (guest clock), qemu ran $wall s, case script exit $(cat "$out/case.rc")"
