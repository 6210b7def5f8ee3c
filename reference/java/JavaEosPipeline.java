// Kafka 2.8.2's Java client in an exactly-once consume-transform-produce loop (reference/javaclient.py's
// JavaEosPipeline): a read_committed KafkaConsumer in a group and a transactional KafkaProducer; each poll's
// records, transformed (same key, same partition number modulo the sink's), and the consumer's offsets
// (sendOffsetsToTransaction with the consumer's group metadata) go in one transaction.  A value becomes
// "out-" + value, or, with tag=TAG, value + "@" + TAG + "." + SEQ (the transaction's number from 0).
//
//   java JavaEosPipeline BOOTSTRAP TRANSACTIONAL_ID GROUP SOURCE SINK [key=value ...]
//        a key=value goes to both clients, "producer.key=value" or "consumer.key=value" to one; tag=TAG and
//        sink.partitions=N are the program's own
//
// stdin: "stop" (or its end) stops the loop, closes both clients and exits.
// stdout, one JSON object a line, each with "ns": System.nanoTime() when it was written (CLOCK_MONOTONIC on
// Linux, the clock of the chaos history's "time"), so a reader that takes the line late knows when it happened:
//   {"ready": true}                                      once both clients are built and initTransactions returned
//   {"begin": SEQ}                                       a transaction begins
//   {"produced": SEQ, "inputs": [[t, p, o, v]], "offsets": {"t/p": o}}   its records sent, its offsets too
//   {"committing": SEQ}                                  commitTransaction is called
//   {"committed": N, "seq": SEQ, "records": K, "offsets": {"t/p": o}}   the N-th committed transaction
//   {"aborted": "ExceptionName", "message": "...", "seq": SEQ, "stage": "produce" | "commit"}
//                                                        a transaction failed, then:
//   {"aborting": SEQ}, {"abort_done": SEQ}               abortTransaction (the consumer rewinds to its commits)
//   {"fatal": "ExceptionName", "message": "...", "seq": SEQ}   fenced (or another fatal error): the loop ends
//   {"closed": true}                                     at the end
import com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.AuthorizationException;
import org.apache.kafka.common.errors.OutOfOrderSequenceException;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.errors.TimeoutException;
import org.apache.kafka.common.errors.UnsupportedVersionException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.atomic.AtomicBoolean;

public class JavaEosPipeline {
    static final ObjectMapper JSON = new ObjectMapper();

    static synchronized void emit(Map<String, Object> m) {
        Map<String, Object> line = new LinkedHashMap<>(m);
        line.put("ns", System.nanoTime());
        try {
            System.out.println(JSON.writeValueAsString(line));
            System.out.flush();
        } catch (Exception e) {
            throw new RuntimeException(e);
        }
    }

    static Map<String, Object> error(String kind, Exception e) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put(kind, e.getClass().getSimpleName());
        m.put("message", String.valueOf(e.getMessage()));
        return m;
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], txnId = args[1], group = args[2], source = args[3], sink = args[4];
        String tag = null;
        int sinkPartitions = -1;
        Properties pp = new Properties(), cp = new Properties();
        pp.put("bootstrap.servers", bootstrap);
        pp.put("transactional.id", txnId);
        cp.put("bootstrap.servers", bootstrap);
        cp.put("group.id", group);
        cp.put("isolation.level", "read_committed");
        cp.put("enable.auto.commit", "false");
        cp.put("auto.offset.reset", "earliest");
        for (int i = 5; i < args.length; i++) {
            int eq = args[i].indexOf('=');
            String k = args[i].substring(0, eq), v = args[i].substring(eq + 1);
            if (k.equals("tag")) tag = v;
            else if (k.equals("sink.partitions")) sinkPartitions = Integer.parseInt(v);
            else if (k.startsWith("producer.")) pp.put(k.substring(9), v);
            else if (k.startsWith("consumer.")) cp.put(k.substring(9), v);
            else { pp.put(k, v); cp.put(k, v); }
        }
        KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(pp, new ByteArraySerializer(), new ByteArraySerializer());
        KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(cp, new ByteArrayDeserializer(), new ByteArrayDeserializer());
        producer.initTransactions();
        consumer.subscribe(List.of(source));
        AtomicBoolean stop = new AtomicBoolean(false);
        Thread reader = new Thread(() -> {
            try {
                BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
                String line;
                while ((line = in.readLine()) != null && !line.trim().equals("stop")) { }
            } catch (Exception ignored) { }
            stop.set(true);
        });
        reader.setDaemon(true);
        reader.start();
        emit(Map.of("ready", true));
        byte[] prefix = "out-".getBytes(StandardCharsets.UTF_8);
        long committed = 0, seq = -1;
        while (!stop.get()) {
            ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofMillis(200));
            if (records.isEmpty()) continue;
            Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
            seq++;
            String stage = "produce";
            try {
                emit(Map.of("begin", seq));
                producer.beginTransaction();
                List<List<Object>> inputs = new java.util.ArrayList<>();
                for (ConsumerRecord<byte[], byte[]> r : records) {
                    byte[] v;
                    String in = r.value() == null ? "" : new String(r.value(), StandardCharsets.UTF_8);
                    if (tag != null) {
                        v = (in + "@" + tag + "." + seq).getBytes(StandardCharsets.UTF_8);
                    } else {
                        v = new byte[prefix.length + (r.value() == null ? 0 : r.value().length)];
                        System.arraycopy(prefix, 0, v, 0, prefix.length);
                        if (r.value() != null) System.arraycopy(r.value(), 0, v, prefix.length, r.value().length);
                    }
                    int p = sinkPartitions > 0 ? r.partition() % sinkPartitions : r.partition();
                    producer.send(new ProducerRecord<>(sink, p, r.key(), v));
                    offsets.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
                    inputs.add(List.of(r.topic(), r.partition(), r.offset(), in));
                }
                producer.sendOffsetsToTransaction(offsets, consumer.groupMetadata());
                Map<String, Object> produced = new LinkedHashMap<>();
                produced.put("produced", seq);
                produced.put("inputs", inputs);
                Map<String, Long> po = new LinkedHashMap<>();
                offsets.forEach((tp, om) -> po.put(tp.topic() + "/" + tp.partition(), om.offset()));
                produced.put("offsets", po);
                emit(produced);
                stage = "commit";
                emit(Map.of("committing", seq));
                for (int attempt = 0; ; attempt++) {
                    try {
                        producer.commitTransaction();
                        break;
                    } catch (TimeoutException e) {   // the commit's outcome is unknown: it may be called again
                        if (attempt >= 5) throw e;
                    }
                }
                committed++;
                Map<String, Object> m = new LinkedHashMap<>();
                m.put("committed", committed);
                m.put("seq", seq);
                m.put("records", records.count());
                Map<String, Long> o = new LinkedHashMap<>();
                offsets.forEach((tp, om) -> o.put(tp.topic() + "/" + tp.partition(), om.offset()));
                m.put("offsets", o);
                emit(m);
            } catch (ProducerFencedException | OutOfOrderSequenceException | AuthorizationException
                     | UnsupportedVersionException e) {
                Map<String, Object> m = error("fatal", e);
                m.put("seq", seq);
                m.put("stage", stage);
                emit(m);
                break;
            } catch (KafkaException e) {
                Map<String, Object> m = error("aborted", e);
                m.put("seq", seq);
                m.put("stage", stage);
                emit(m);
                try {
                    emit(Map.of("aborting", seq));
                    producer.abortTransaction();
                    emit(Map.of("abort_done", seq));
                } catch (KafkaException again) {
                    Map<String, Object> f = error("fatal", again);
                    f.put("seq", seq);
                    f.put("stage", "abort");
                    emit(f);
                    break;
                }
                Set<TopicPartition> assigned = consumer.assignment();
                Map<TopicPartition, OffsetAndMetadata> at = consumer.committed(assigned);
                for (TopicPartition tp : assigned) {
                    OffsetAndMetadata om = at.get(tp);
                    if (om != null) consumer.seek(tp, om.offset());
                    else consumer.seekToBeginning(List.of(tp));
                }
            }
        }
        try {
            consumer.close(Duration.ofSeconds(10));
            producer.close(Duration.ofSeconds(10));
        } catch (Exception ignored) { }
        emit(Map.of("closed", true));
        Runtime.getRuntime().halt(0);
    }
}
