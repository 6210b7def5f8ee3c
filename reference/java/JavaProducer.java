// Kafka 2.8.2's Java producer driven by lines on stdin (reference/javaclient.py's JavaProducer).
//
//   java JavaProducer BOOTSTRAP [key=value ...]        producer configs (acks, enable.idempotence, compression.type, ...)
//
// stdin, one command a line:
//   send ID TOPIC PARTITION KEY VALUE [HEADERS]   PARTITION -1: the producer's partitioner; KEY and VALUE base64
//                                                 ("-" for null, "~" for empty); HEADERS name=base64 pairs joined by ","
//   flush                                        producer.flush(), then {"flushed": true}
// stdout, one JSON object a line:
//   {"ready": true}                               once the producer is built
//   {"id": ID, "ok": true, "partition": P, "offset": O}                   from the send's callback
//   {"id": ID, "ok": false, "error": "NotEnoughReplicasException", "message": "...", "retriable": true,
//    "handed": true}                              "handed": false when send() itself threw (not handed over)
//   {"closed": true}                              at the end of stdin, once producer.close() returned
import com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.errors.RetriableException;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.serialization.ByteArraySerializer;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.Base64;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Properties;

public class JavaProducer {
    static final ObjectMapper JSON = new ObjectMapper();

    static synchronized void emit(Map<String, Object> m) {
        try {
            System.out.println(JSON.writeValueAsString(m));
            System.out.flush();
        } catch (Exception e) {
            throw new RuntimeException(e);
        }
    }

    static byte[] b64(String s) {
        return s.equals("-") ? null : s.equals("~") ? new byte[0] : Base64.getDecoder().decode(s);
    }

    static Map<String, Object> failure(String id, Exception e, boolean handed) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("id", id);
        m.put("ok", false);
        m.put("error", e.getClass().getSimpleName());
        m.put("message", String.valueOf(e.getMessage()));
        m.put("retriable", e instanceof RetriableException);
        m.put("handed", handed);
        return m;
    }

    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put("bootstrap.servers", args[0]);
        for (int i = 1; i < args.length; i++) {
            int eq = args[i].indexOf('=');
            props.put(args[i].substring(0, eq), args[i].substring(eq + 1));
        }
        KafkaProducer<byte[], byte[]> producer =
                new KafkaProducer<>(props, new ByteArraySerializer(), new ByteArraySerializer());
        emit(Map.of("ready", true));
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            String[] f = line.trim().split(" ");
            if (f[0].equals("flush")) {
                producer.flush();
                emit(Map.of("flushed", true));
            } else if (f[0].equals("send")) {
                String id = f[1];
                int partition = Integer.parseInt(f[3]);
                RecordHeaders headers = new RecordHeaders();
                if (f.length > 6 && !f[6].isEmpty()) {
                    for (String h : f[6].split(",")) {
                        int eq = h.indexOf('=');
                        headers.add(h.substring(0, eq), b64(h.substring(eq + 1)));
                    }
                }
                ProducerRecord<byte[], byte[]> rec = new ProducerRecord<>(f[2], partition < 0 ? null : partition,
                        null, b64(f[4]), b64(f[5]), headers);
                try {
                    producer.send(rec, (md, e) -> {
                        if (e != null) {
                            emit(failure(id, e, true));
                            return;
                        }
                        Map<String, Object> m = new LinkedHashMap<>();
                        m.put("id", id);
                        m.put("ok", true);
                        m.put("partition", md.partition());
                        m.put("offset", md.offset());
                        emit(m);
                    });
                } catch (Exception e) {   // a timeout waiting for metadata or buffer space: not handed over
                    emit(failure(id, e, false));
                }
            } else if (!f[0].isEmpty()) {
                emit(Map.of("bad_command", line));
            }
        }
        producer.close();
        emit(Map.of("closed", true));
        Runtime.getRuntime().halt(0);
    }
}
