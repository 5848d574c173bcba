#!/usr/bin/env bash
# Makes the certificates of the TLS tests in DIR (created if missing), with
# openssl from Debian; ECDSA P-256 keys, so it takes well under a second.
#   ca.pem ca.key           the test CA
#   other-ca.pem            a CA that signed nothing here (the wrong CA)
#   server.pem server.key   the server, signed by ca.pem, for localhost and 127.0.0.1
#   expired.pem expired.key the same names, signed by ca.pem, expired a day ago
#   client.pem client.key   a client certificate, signed by ca.pem
set -euo pipefail
dir=${1:?usage: tls_certificates.sh DIR}
mkdir -p "$dir"
cd "$dir"
key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }
ca() {  # name, common name
  key "$1.key"
  openssl req -x509 -new -key "$1.key" -out "$1.pem" -days 3650 -subj "/CN=$2" 2>/dev/null
}
signed() {  # name, common name, days (negative: expired), extensions
  key "$1.key"
  openssl req -new -key "$1.key" -out "$1.csr" -subj "/CN=$2" 2>/dev/null
  printf '%s\n' "$4" >"$1.ext"
  openssl x509 -req -in "$1.csr" -CA ca.pem -CAkey ca.key -CAcreateserial -out "$1.pem" -days "$3" \
    -extfile "$1.ext" 2>/dev/null
  rm -f "$1.csr" "$1.ext"
}
ca ca "fleetcron test CA"
ca other-ca "some other CA"
signed server localhost 3650 "subjectAltName=DNS:localhost,IP:127.0.0.1"
signed expired localhost -1 "subjectAltName=DNS:localhost,IP:127.0.0.1"
signed client "fleetcron test client" 3650 "extendedKeyUsage=clientAuth"
chmod 644 ./*.key  # servers started as another user (PostgreSQL's) may read them
