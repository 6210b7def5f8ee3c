// Kafka 2.8.2's Java client in an exactly-once consume-transform-produce loop (reference/javaclient.py's
// JavaEosPipeline): a read_committed KafkaConsumer in a group and a transactional KafkaProducer; each poll's
// records, transformed ("out-" + value, same key, same partition number), and the consumer's offsets
// (sendOffsetsToTransaction with the consumer's group metadata) go in one transaction.
//
//   java JavaEosPipeline BOOTSTRAP TRANSACTIONAL_ID GROUP SOURCE SINK [key=value ...]
//        a key=value goes to both clients, "producer.key=value" or "consumer.key=value" to one
//
// stdin: "stop" (or its end) stops the loop, closes both clients and exits.
// stdout, one JSON object a line:
//   {"ready": true}                                      once both clients are built and initTransactions returned
//   {"committed": N, "records": K, "offsets": {"t/p": o}}   after the N-th committed transaction, with its offsets
//   {"aborted": "ExceptionName", "message": "..."}       a transaction aborted (the consumer rewound to its commits)
//   {"fatal": "ExceptionName", "message": "..."}         fenced (or another fatal error): the loop ends
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
        try {
            System.out.println(JSON.writeValueAsString(m));
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
            if (k.startsWith("producer.")) pp.put(k.substring(9), v);
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
        long committed = 0;
        while (!stop.get()) {
            ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofMillis(200));
            if (records.isEmpty()) continue;
            Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
            try {
                producer.beginTransaction();
                for (ConsumerRecord<byte[], byte[]> r : records) {
                    byte[] v = new byte[prefix.length + (r.value() == null ? 0 : r.value().length)];
                    System.arraycopy(prefix, 0, v, 0, prefix.length);
                    if (r.value() != null) System.arraycopy(r.value(), 0, v, prefix.length, r.value().length);
                    producer.send(new ProducerRecord<>(sink, r.partition(), r.key(), v));
                    offsets.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
                }
                producer.sendOffsetsToTransaction(offsets, consumer.groupMetadata());
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
                m.put("records", records.count());
                Map<String, Long> o = new LinkedHashMap<>();
                offsets.forEach((tp, om) -> o.put(tp.topic() + "/" + tp.partition(), om.offset()));
                m.put("offsets", o);
                emit(m);
            } catch (ProducerFencedException | OutOfOrderSequenceException | AuthorizationException
                     | UnsupportedVersionException e) {
                emit(error("fatal", e));
                break;
            } catch (KafkaException e) {
                emit(error("aborted", e));
                try {
                    producer.abortTransaction();
                } catch (KafkaException again) {
                    emit(error("fatal", again));
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
