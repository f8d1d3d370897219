#!/bin/bash
# as apache/kafka's bin/kafka-server-start.sh CONFIG: the broker, logging to the console
exec java ${KAFKA_HEAP_OPTS:--Xmx1G -Xms1G} -XX:+UseG1GC -Djava.awt.headless=true ${KAFKA_OPTS:-} \
  "-Dlog4j2.configurationFile=${KAFKA_LOG4J_CONFIG:-/opt/kafka/config/log4j2.properties}" \
  -cp '/opt/kafka/libs/*' kafka.Kafka "$@"
