// kafkajs transactions against kafkasim: an aborted transaction, then consume-transform-produce with
// sendOffsets, each batch in one transaction; a read_committed consumer reads the output back.
// Usage: node txn.js BOOTSTRAP INPUT OUTPUT GROUP COUNT; prints one JSON line.
const { Kafka, logLevel } = require("kafkajs");

async function main() {
  const [bootstrap, input, output, group, countArg] = process.argv.slice(2);
  const count = Number(countArg);
  const kafka = new Kafka({ clientId: "kafkajs-txn", brokers: bootstrap.split(","), logLevel: logLevel.NOTHING });
  const admin = kafka.admin();
  await admin.connect();
  await admin.createTopics({ topics: [{ topic: input, numPartitions: 2, replicationFactor: 3 },
                                      { topic: output, numPartitions: 2, replicationFactor: 3 }],
                             waitForLeaders: true });
  await admin.disconnect();
  const plain = kafka.producer();
  await plain.connect();
  const inputs = [];
  for (let i = 0; i < count; i++) inputs.push({ key: `k${i}`, value: `${i}`, partition: i % 2 });
  await plain.send({ topic: input, acks: -1, messages: inputs });
  await plain.disconnect();

  const producer = kafka.producer({ transactionalId: "kafkajs-txn-app", idempotent: true, maxInFlightRequests: 1 });
  await producer.connect();
  const doomed = await producer.transaction();
  await doomed.send({ topic: output, messages: [{ key: "x", value: "aborted", partition: 0 }] });
  await doomed.abort();

  const consumer = kafka.consumer({ groupId: group, readUncommitted: false });
  await consumer.connect();
  await consumer.subscribe({ topic: input, fromBeginning: true });
  let done = 0;
  let transactions = 0;
  await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error("timed out transforming")), 90000);
    consumer.run({
      autoCommit: false,
      eachBatch: async ({ batch }) => {
        const txn = await producer.transaction();
        try {
          await txn.send({ topic: output, messages: batch.messages.map((m) => (
            { key: m.key, value: `out-${m.value.toString()}`, partition: batch.partition })) });
          const last = batch.messages[batch.messages.length - 1];
          await txn.sendOffsets({ consumerGroupId: group, topics: [{ topic: input, partitions: [
            { partition: batch.partition, offset: (BigInt(last.offset) + 1n).toString() }] }] });
          await txn.commit();
        } catch (e) {
          await txn.abort();
          throw e;
        }
        transactions += 1;
        done += batch.messages.length;
        if (done >= count) { clearTimeout(timer); resolve(); }
      },
    });
  });
  await consumer.disconnect();
  await producer.disconnect();

  const reader = kafka.consumer({ groupId: `${group}-reader`, readUncommitted: false });
  await reader.connect();
  await reader.subscribe({ topic: output, fromBeginning: true });
  const values = [];
  await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error("timed out reading the output")), 60000);
    reader.run({
      eachMessage: async ({ message }) => {
        values.push(message.value.toString());
        if (values.length >= count) { clearTimeout(timer); setTimeout(resolve, 1000); }
      },
    });
  });
  await reader.disconnect();
  const admin2 = kafka.admin();
  await admin2.connect();
  const offsets = await admin2.fetchOffsets({ groupId: group, topics: [input] });
  await admin2.disconnect();
  console.log(JSON.stringify({ values, offsets, transactions }));
}

main().catch((e) => { console.error(e); process.exit(1); });
