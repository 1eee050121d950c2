#!/bin/sh
# Makes the container image's root (Containerfile's build stage runs it, on Debian 12):
#   scripts/image-root.sh BINARY DOCROOT ROOT
# ROOT gets the dynamic BINARY as /ringhttpd with exactly the shared libraries ldd names for it
# (Debian 12's, in its merged-/usr layout), libgcc_s (glibc loads it itself to unwind a thread
# that exits), /etc/passwd and /etc/group for root and nobody (glibc 2.36 reads them with its
# built-in NSS "files" module: --user, the ACME state's owner), /etc/nsswitch.conf, Debian's
# CA bundle (the ACME client's HTTPS), /tmp, the ACME state directory, DOCROOT as /www, and the
# copyright file of every Debian package a file came from. No shell, no package manager: the
# image runs the server and nothing else (issue 36).
set -eu
bin=$1 docroot=$2 root=$3
arch=$(gcc -print-multiarch)

mkdir -p "$root/usr/lib/$arch" "$root/usr/lib64" "$root/etc/ssl/certs" "$root/tmp" \
    "$root/var/lib/ringhttpd/acme" "$root/usr/share/doc"
ln -sfn usr/lib "$root/lib"
ln -sfn usr/lib64 "$root/lib64"
chmod 1777 "$root/tmp"
chmod 700 "$root/var/lib/ringhttpd/acme"
install -m 755 "$bin" "$root/ringhttpd"
cp -r "$docroot" "$root/www"

# Each library under the name the loader asks for (ldd's left column, or the interpreter's path),
# as a file with the contents of what that name resolves to on the build system.
libs=$( (ldd "$bin" | awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// {print $1}'
    ls "/usr/lib/$arch/libgcc_s.so.1") | sort -u)
for lib in $libs; do
    dir=$(readlink -f "$(dirname "$lib")")
    cp -L "$lib" "$root$dir/$(basename "$lib")"
    # dpkg knows a file by the path its package ships it at: /lib/... for some (merged /usr).
    real=$(readlink -f "$lib")
    pkg=$(dpkg -S "$real" "/lib/$arch/${real##*/}" "$lib" 2>/dev/null | head -n 1 | cut -d: -f1) ||
        true
    [ -z "$pkg" ] || [ ! -f "/usr/share/doc/$pkg/copyright" ] ||
        install -D -m 644 "/usr/share/doc/$pkg/copyright" "$root/usr/share/doc/$pkg/copyright"
done
[ -e "$root/lib64/ld-linux-x86-64.so.2" ] || [ "$arch" != x86_64-linux-gnu ] || {
    echo "image-root.sh: the loader is missing from $root" >&2
    exit 1
}
cp -L /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/"
install -D -m 644 /usr/share/doc/ca-certificates/copyright \
    "$root/usr/share/doc/ca-certificates/copyright"

cat >"$root/etc/passwd" <<'EOF'
root:x:0:0:root:/root:/sbin/nologin
nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin
EOF
cat >"$root/etc/group" <<'EOF'
root:x:0:
nogroup:x:65534:
EOF
cat >"$root/etc/nsswitch.conf" <<'EOF'
passwd: files
group: files
hosts: files dns
EOF
