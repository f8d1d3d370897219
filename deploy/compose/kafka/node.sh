#!/bin/bash
# One node of the compose install's 3-node KRaft cluster (broker and controller in one process),
# run by the apache/kafka image (or its stand-in): writes the node's server.properties, formats
# its storage once with the SCRAM users (admin and one per Horae process role), then starts it.
#
# Ports (host networking, 127.0.0.1 only), from the 3-digit HORAE_PORT_PREFIX P and NODE_ID n:
#   P1n  CLIENT     SASL_SSL, SCRAM-SHA-512: every client (Horae's processes, tools)
#   P3n  BROKER     SASL_SSL, PLAIN (the admin): replication between the brokers
#   P4n  CONTROLLER SASL_SSL, PLAIN (the admin): the KRaft quorum
# TLS: /etc/kafka/secrets/kafka.pem (key and certificate chain, PEM), kafka.password (the key's)
# and ca.crt (deploy/compose/make-certs makes them).
set -euo pipefail
: "${NODE_ID:?}" "${HORAE_PORT_PREFIX:?}" "${KAFKA_CLUSTER_ID:?}" "${HORAE_KAFKA_ADMIN_PASSWORD:?}"
P=$HORAE_PORT_PREFIX
n=$NODE_ID
secrets=${KAFKA_SECRETS_DIR:-/etc/kafka/secrets}
data=${KAFKA_DATA_DIR:-/var/lib/kafka/data}
config=$(mktemp -d)/server.properties
admin=$HORAE_KAFKA_ADMIN_PASSWORD
plain="org.apache.kafka.common.security.plain.PlainLoginModule required username=\"admin\" password=\"$admin\" user_admin=\"$admin\";"
scram="org.apache.kafka.common.security.scram.ScramLoginModule required;"
tls() {  # the TLS settings of listener $1
  cat <<TLS
listener.name.$1.ssl.keystore.type=PEM
listener.name.$1.ssl.keystore.location=$secrets/kafka.pem
listener.name.$1.ssl.key.password=$(cat "$secrets/kafka.password")
listener.name.$1.ssl.truststore.type=PEM
listener.name.$1.ssl.truststore.location=$secrets/ca.crt
TLS
}
umask 077
cat >"$config" <<PROPS
process.roles=broker,controller
node.id=$n
controller.quorum.voters=1@127.0.0.1:${P}41,2@127.0.0.1:${P}42,3@127.0.0.1:${P}43
listeners=CLIENT://127.0.0.1:${P}1$n,BROKER://127.0.0.1:${P}3$n,CONTROLLER://127.0.0.1:${P}4$n
advertised.listeners=CLIENT://127.0.0.1:${P}1$n,BROKER://127.0.0.1:${P}3$n
listener.security.protocol.map=CLIENT:SASL_SSL,BROKER:SASL_SSL,CONTROLLER:SASL_SSL
controller.listener.names=CONTROLLER
inter.broker.listener.name=BROKER
sasl.mechanism.inter.broker.protocol=PLAIN
sasl.mechanism.controller.protocol=PLAIN
listener.name.client.sasl.enabled.mechanisms=SCRAM-SHA-512
listener.name.client.scram-sha-512.sasl.jaas.config=$scram
listener.name.broker.sasl.enabled.mechanisms=PLAIN
listener.name.broker.plain.sasl.jaas.config=$plain
listener.name.controller.sasl.enabled.mechanisms=PLAIN
listener.name.controller.plain.sasl.jaas.config=$plain
$(tls client)
$(tls broker)
$(tls controller)
authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
allow.everyone.if.no.acl.found=false
super.users=User:admin
log.dirs=$data
# three nodes: every partition on three, a write acknowledged by two (acks=all)
default.replication.factor=3
min.insync.replicas=2
offsets.topic.replication.factor=3
transaction.state.log.replication.factor=3
transaction.state.log.min.isr=2
share.coordinator.state.topic.replication.factor=3
share.coordinator.state.topic.min.isr=2
auto.create.topics.enable=false
group.initial.rebalance.delay.ms=${KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS:-3000}
num.partitions=${KAFKA_NUM_PARTITIONS:-12}
offsets.topic.num.partitions=${KAFKA_OFFSETS_PARTITIONS:-50}
transaction.state.log.num.partitions=${KAFKA_TRANSACTION_PARTITIONS:-50}
num.network.threads=${KAFKA_NETWORK_THREADS:-3}
num.io.threads=${KAFKA_IO_THREADS:-8}
log.cleaner.dedupe.buffer.size=${KAFKA_CLEANER_BUFFER:-134217728}
PROPS
if [ ! -f "$data/meta.properties" ]; then
  users=(--add-scram "SCRAM-SHA-512=[name=admin,password=$admin]")
  for role in planner dispatcher projector api; do
    var=HORAE_KAFKA_${role^^}_PASSWORD
    users+=(--add-scram "SCRAM-SHA-512=[name=$role,password=${!var:?$var must be set}]")
  done
  /opt/kafka/bin/kafka-storage.sh format --ignore-formatted -t "$KAFKA_CLUSTER_ID" -c "$config" "${users[@]}"
fi
exec /opt/kafka/bin/kafka-server-start.sh "$config"
