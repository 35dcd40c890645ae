#!/usr/bin/env bash
# Makes the Secrets deploy/ mounts, once, and prints them as manifests:
#   otelcol-gpu-gateway: token, tls.crt, tls.key, ca.crt   (the gateway's serving certificate and
#                        key; the CA, for the scale-out gateways to check the watchdog's)
#   otelcol-gpu-agent:   token, ca.crt                     (the CA that signed the gateway's certificate)
# The files stay in $SECRETS_DIR (default deploy/.secrets, ignored by git) so that a second run,
# or the edge clusters' agents, use the same CA and token. Extra DNS names for the gateway's
# certificate (the address edge agents dial) go in GATEWAY_DNS_NAMES, separated by spaces.
#   deploy/secrets.sh | kubectl apply -f -      (what `make secrets` does)
# To rotate: append a new token line to $SECRETS_DIR/gateway-tokens, apply, roll the agents with
# the new $SECRETS_DIR/token, then drop the old line.
set -euo pipefail

namespace="${NAMESPACE:-otelcol-gpu}"
dir="${SECRETS_DIR:-$(dirname "$0")/.secrets}"
names="otelcol-gpu-gateway otelcol-gpu-gateway.${namespace} otelcol-gpu-gateway.${namespace}.svc otelcol-gpu-gateway.${namespace}.svc.cluster.local ${GATEWAY_DNS_NAMES:-}"
mkdir -p "$dir"
chmod 700 "$dir"
cd "$dir"

if [[ ! -s token ]]; then
	(umask 077 && openssl rand -hex 32 >token)
	cp token gateway-tokens
fi
if [[ ! -s ca.key ]]; then
	(umask 077 && openssl ecparam -name prime256v1 -genkey -noout -out ca.key) 2>/dev/null
	openssl req -x509 -new -key ca.key -sha256 -days 3650 -subj "/CN=otelcol-gpu CA" -out ca.crt 2>/dev/null
fi
if [[ ! -s tls.key ]]; then
	san="$(for n in $names; do printf 'DNS:%s,' "$n"; done)"
	(umask 077 && openssl ecparam -name prime256v1 -genkey -noout -out tls.key) 2>/dev/null
	openssl req -new -key tls.key -subj "/CN=otelcol-gpu-gateway" -out tls.csr 2>/dev/null
	openssl x509 -req -in tls.csr -CA ca.crt -CAkey ca.key -CAcreateserial -sha256 -days 825 \
		-extfile <(printf 'subjectAltName=%s\nextendedKeyUsage=serverAuth\nkeyUsage=digitalSignature' "${san%,}") \
		-out tls.crt 2>/dev/null
	rm -f tls.csr
fi

kubectl create secret generic otelcol-gpu-gateway --namespace "$namespace" --dry-run=client -o yaml \
	--from-file=token=gateway-tokens --from-file=tls.crt --from-file=tls.key --from-file=ca.crt
echo ---
kubectl create secret generic otelcol-gpu-agent --namespace "$namespace" --dry-run=client -o yaml \
	--from-file=token --from-file=ca.crt
