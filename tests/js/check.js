// kafkajs against kafkasim: produce keyed records with headers, consume them in a group, commit.
// Usage: node check.js BOOTSTRAP TOPIC GROUP COUNT; prints one JSON line with what was read.
const { Kafka, logLevel } = require("kafkajs");

async function main() {
  const [bootstrap, topic, group, countArg] = process.argv.slice(2);
  const count = Number(countArg);
  const kafka = new Kafka({ clientId: "kafkajs-check", brokers: bootstrap.split(","), logLevel: logLevel.NOTHING });
  const admin = kafka.admin();
  await admin.connect();
  await admin.createTopics({ topics: [{ topic, numPartitions: 2, replicationFactor: 3 }], waitForLeaders: true });
  await admin.disconnect();
  const producer = kafka.producer();
  await producer.connect();
  const messages = [];
  for (let i = 0; i < count; i++) messages.push({ key: `k${i}`, value: `v${i}`, headers: { h: `${i}` } });
  await producer.send({ topic, acks: -1, messages });
  await producer.disconnect();
  const consumer = kafka.consumer({ groupId: group });
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  const seen = {};
  await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error("timed out reading")), 60000);
    consumer.run({
      autoCommit: true,
      eachMessage: async ({ message }) => {
        seen[message.key.toString()] = [message.value.toString(), message.headers.h.toString()];
        if (Object.keys(seen).length === count) { clearTimeout(timer); resolve(); }
      },
    });
  });
  await consumer.disconnect();  // commits what was read, then leaves the group
  const admin2 = kafka.admin();
  await admin2.connect();
  const offsets = await admin2.fetchOffsets({ groupId: group, topics: [topic] });
  await admin2.disconnect();
  console.log(JSON.stringify({ seen, offsets }));
}

main().catch((e) => { console.error(e); process.exit(1); });
