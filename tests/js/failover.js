// kafkajs as a committing group member for the coordinator-failover check (tests/test_kafka_clients.py).
// Usage: node failover.js BOOTSTRAP TOPIC GROUP CLIENT_ID; consumes TOPIC in GROUP, commits each record's
// next offset itself and prints "ack PARTITION OFFSET" once kafkajs resolved that commit; stops when
// its stdin closes.
const { Kafka, logLevel } = require("kafkajs");

async function main() {
  const [bootstrap, topic, group, clientId] = process.argv.slice(2);
  const kafka = new Kafka({ clientId, brokers: bootstrap.split(","), logLevel: logLevel.NOTHING,
                            retry: { retries: 100, initialRetryTime: 50, maxRetryTime: 1000 } });
  const consumer = kafka.consumer({ groupId: group, sessionTimeout: 6000, heartbeatInterval: 300 });
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  process.stdin.on("end", async () => {
    await consumer.disconnect();
    process.exit(0);
  });
  process.stdin.resume();
  await consumer.run({
    autoCommit: false,
    eachMessage: async ({ partition, message }) => {
      const offset = (BigInt(message.offset) + 1n).toString();
      await consumer.commitOffsets([{ topic, partition, offset }]);
      process.stdout.write(`ack ${partition} ${offset}\n`);
    },
  });
}

main().catch((e) => { console.error(e); process.exit(1); });
