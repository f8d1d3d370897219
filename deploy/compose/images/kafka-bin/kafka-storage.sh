#!/bin/bash
# as apache/kafka's bin/kafka-storage.sh: kafka.tools.StorageTool on the broker's classpath
exec java ${KAFKA_HEAP_OPTS:--Xmx256m} -cp '/opt/kafka/libs/*' \
  "-Dlog4j2.configurationFile=${KAFKA_LOG4J_CONFIG:-/opt/kafka/config/log4j2.properties}" \
  kafka.tools.StorageTool "$@"
