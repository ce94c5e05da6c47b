// Peer is the Java client (kafka-clients) as a peer of Riffle in the
// interoperability tests (internal/kafkatest/integration/java_*_test.go).
// The harness compiles it with javac against the broker's jars
// (kafkatest.BuildJavaPeer) and drives it through its arguments, stdin
// and stdout; it writes one JSON object per line on stdout and logs to
// stderr.
//
//   produce --bootstrap B [--prop k=v]...
//     stdin: rec TOPIC PARTITION KEY VALUE TS [HKEY:HVALUE]...
//            (bytes are "-" for null or "b:" + base64; PARTITION and TS -1
//            for none; a header key is base64 without "b:"),
//            flush | begin | commit | abort. With transactional.id set,
//            initTransactions runs first. flush, commit and abort print
//            {"ack":SEQ,...} for every record sent since the last of them,
//            then {"done":"flush"} (or commit, abort).
//   consume --bootstrap B --topic T [--prop k=v]...
//     reads every partition of T from its start to its end offsets (the
//     last stable offsets under read_committed), prints {"ev":"rec",...}
//     per record, then {"ev":"end"}.
//   group --bootstrap B --group G --topic T [--max N] [--prop k=v]...
//     a group member: prints {"ev":"assigned"|"revoked"|"lost","ms":...,
//     "tps":[...]} (revoked after the commit it makes), {"ev":"rec",...} per
//     record, commits synchronously (commitSync()) after every poll; with
//     --max N it polls one record at a time and stops after N or when stdin says stop or closes, prints
//     {"ev":"closed"} once closed.
package riffle.javapeer;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Base64;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.Future;
import java.util.concurrent.atomic.AtomicBoolean;

import org.apache.kafka.clients.consumer.CommitFailedException;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.RebalanceInProgressException;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public final class Peer {
    private static final PrintStream OUT = new PrintStream(System.out, false, StandardCharsets.UTF_8);

    private static synchronized void emit(String json) {
        OUT.println(json);
        OUT.flush();
    }

    public static void main(String[] args) throws Exception {
        if (args.length == 0) {
            System.err.println("usage: Peer produce|consume|group --bootstrap B ...");
            System.exit(2);
        }
        Map<String, String> opt = new HashMap<>();
        Properties props = new Properties();
        for (int i = 1; i < args.length; i++) {
            String a = args[i];
            if (!a.startsWith("--") || i + 1 >= args.length) {
                System.err.println("bad argument " + a);
                System.exit(2);
            }
            String v = args[++i];
            if (a.equals("--prop")) {
                int eq = v.indexOf('=');
                props.put(v.substring(0, eq), v.substring(eq + 1));
            } else {
                opt.put(a.substring(2), v);
            }
        }
        props.put("bootstrap.servers", opt.get("bootstrap"));
        switch (args[0]) {
            case "produce" -> produce(props);
            case "consume" -> consume(props, opt.get("topic"));
            case "group" -> group(props, opt.get("group"), opt.get("topic"), Long.parseLong(opt.getOrDefault("max", "-1")));
            default -> {
                System.err.println("unknown mode " + args[0]);
                System.exit(2);
            }
        }
    }

    private static byte[] bytes(String tok) {
        if (tok.equals("-")) {
            return null;
        }
        if (!tok.startsWith("b:")) {
            throw new IllegalArgumentException("bytes token " + tok);
        }
        return Base64.getDecoder().decode(tok.substring(2));
    }

    private static String b64(byte[] b) {
        return b == null ? "null" : "\"" + Base64.getEncoder().encodeToString(b) + "\"";
    }

    private static String quote(String s) {
        StringBuilder sb = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') {
                sb.append('\\').append(c);
            } else if (c < 0x20) {
                sb.append(String.format("\\u%04x", (int) c));
            } else {
                sb.append(c);
            }
        }
        return sb.append('"').toString();
    }

    private static void produce(Properties props) throws Exception {
        props.put("key.serializer", ByteArraySerializer.class.getName());
        props.put("value.serializer", ByteArraySerializer.class.getName());
        boolean txn = props.containsKey("transactional.id");
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        try (KafkaProducer<byte[], byte[]> p = new KafkaProducer<>(props)) {
            if (txn) {
                p.initTransactions();
            }
            List<Future<RecordMetadata>> pending = new ArrayList<>();
            List<Integer> seqs = new ArrayList<>();
            int seq = 0;
            String line;
            while ((line = in.readLine()) != null) {
                String[] f = line.trim().split(" ");
                switch (f[0]) {
                    case "rec" -> {
                        int part = Integer.parseInt(f[2]);
                        long ts = Long.parseLong(f[5]);
                        List<Header> hs = new ArrayList<>();
                        for (int i = 6; i < f.length; i++) {
                            int c = f[i].indexOf(':');
                            String k = new String(Base64.getDecoder().decode(f[i].substring(0, c)), StandardCharsets.UTF_8);
                            hs.add(new RecordHeader(k, bytes(f[i].substring(c + 1))));
                        }
                        ProducerRecord<byte[], byte[]> r = new ProducerRecord<>(f[1], part < 0 ? null : part,
                                ts < 0 ? null : ts, bytes(f[3]), bytes(f[4]), hs);
                        pending.add(p.send(r));
                        seqs.add(seq++);
                    }
                    case "begin" -> {
                        p.beginTransaction();
                        emit("{\"done\":\"begin\"}");
                    }
                    case "flush", "commit", "abort" -> {
                        String err = null;
                        try {
                            switch (f[0]) {
                                case "flush" -> p.flush();
                                case "commit" -> p.commitTransaction();
                                default -> {
                                    p.flush(); // the records are written (and then aborted)
                                    p.abortTransaction();
                                }
                            }
                        } catch (Exception e) {
                            err = e.toString();
                        }
                        for (int i = 0; i < pending.size(); i++) {
                            try {
                                RecordMetadata md = pending.get(i).get();
                                emit("{\"ack\":" + seqs.get(i) + ",\"p\":" + md.partition() + ",\"o\":" + md.offset()
                                        + ",\"ts\":" + md.timestamp() + "}");
                            } catch (Exception e) {
                                emit("{\"ack\":" + seqs.get(i) + ",\"error\":" + quote(e.toString()) + "}");
                            }
                        }
                        pending.clear();
                        seqs.clear();
                        emit("{\"done\":\"" + f[0] + "\"" + (err == null ? "" : ",\"error\":" + quote(err)) + "}");
                    }
                    default -> throw new IllegalArgumentException("unknown command " + line);
                }
            }
        }
        emit("{\"done\":\"close\"}");
    }

    private static String rec(ConsumerRecord<byte[], byte[]> r) {
        StringBuilder sb = new StringBuilder("{\"ev\":\"rec\",\"topic\":").append(quote(r.topic()))
                .append(",\"p\":").append(r.partition()).append(",\"o\":").append(r.offset())
                .append(",\"ts\":").append(r.timestamp()).append(",\"tstype\":").append(quote(r.timestampType().name))
                .append(",\"epoch\":").append(r.leaderEpoch().orElse(-1))
                .append(",\"key\":").append(b64(r.key())).append(",\"value\":").append(b64(r.value()))
                .append(",\"headers\":[");
        boolean first = true;
        for (Header h : r.headers()) {
            if (!first) {
                sb.append(',');
            }
            first = false;
            sb.append('[').append(b64(h.key().getBytes(StandardCharsets.UTF_8))).append(',').append(b64(h.value())).append(']');
        }
        return sb.append("],\"ms\":").append(System.currentTimeMillis()).append('}').toString();
    }

    private static void deserializers(Properties props) {
        props.put("key.deserializer", ByteArrayDeserializer.class.getName());
        props.put("value.deserializer", ByteArrayDeserializer.class.getName());
    }

    private static void consume(Properties props, String topic) {
        deserializers(props);
        props.putIfAbsent("enable.auto.commit", "false");
        try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(props)) {
            List<TopicPartition> tps = new ArrayList<>();
            for (PartitionInfo pi : c.partitionsFor(topic, Duration.ofSeconds(60))) {
                tps.add(new TopicPartition(topic, pi.partition()));
            }
            c.assign(tps);
            c.seekToBeginning(tps);
            Map<TopicPartition, Long> end = c.endOffsets(tps, Duration.ofSeconds(60));
            while (true) {
                boolean done = true;
                for (TopicPartition tp : tps) {
                    if (c.position(tp, Duration.ofSeconds(60)) < end.get(tp)) {
                        done = false;
                    }
                }
                if (done) {
                    break;
                }
                for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(500))) {
                    emit(rec(r));
                }
            }
        }
        emit("{\"ev\":\"end\"}");
    }

    private static String tps(Collection<TopicPartition> tps) {
        StringBuilder sb = new StringBuilder("[");
        boolean first = true;
        for (TopicPartition tp : tps) {
            if (!first) {
                sb.append(',');
            }
            first = false;
            sb.append("{\"topic\":").append(quote(tp.topic())).append(",\"p\":").append(tp.partition()).append('}');
        }
        return sb.append(']').toString();
    }

    private static void group(Properties props, String group, String topic, long max) throws Exception {
        deserializers(props);
        props.put("group.id", group);
        props.putIfAbsent("enable.auto.commit", "false");
        props.putIfAbsent("auto.offset.reset", "earliest");
        if (max >= 0) {
            // one record a poll, so that the member stops at exactly max and
            // commitSync() commits the positions after what it printed (with
            // the last record's leader epoch), as an application's would
            props.putIfAbsent("max.poll.records", "1");
        }
        AtomicBoolean stop = new AtomicBoolean();
        KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(props);
        Thread reader = new Thread(() -> {
            try {
                BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
                String line;
                while ((line = in.readLine()) != null && !line.trim().equals("stop")) {
                    // only stop is understood
                }
            } catch (Exception e) {
                // stdin gone: stop
            }
            stop.set(true);
            c.wakeup();
        });
        reader.setDaemon(true);
        reader.start();
        c.subscribe(List.of(topic), new ConsumerRebalanceListener() {
            @Override
            public void onPartitionsAssigned(Collection<TopicPartition> parts) {
                emit("{\"ev\":\"assigned\",\"ms\":" + System.currentTimeMillis() + ",\"tps\":" + tps(parts) + "}");
            }

            @Override
            public void onPartitionsRevoked(Collection<TopicPartition> parts) {
                if (!parts.isEmpty()) {
                    try {
                        c.commitSync();
                    } catch (RebalanceInProgressException | CommitFailedException e) {
                        System.err.println("commit on revoke failed: " + e);
                    }
                }
                emit("{\"ev\":\"revoked\",\"ms\":" + System.currentTimeMillis() + ",\"tps\":" + tps(parts) + "}");
            }

            @Override
            public void onPartitionsLost(Collection<TopicPartition> parts) {
                emit("{\"ev\":\"lost\",\"ms\":" + System.currentTimeMillis() + ",\"tps\":" + tps(parts) + "}");
            }
        });
        long n = 0;
        try {
            while (!stop.get() && (max < 0 || n < max)) {
                ConsumerRecords<byte[], byte[]> rs;
                try {
                    rs = c.poll(Duration.ofMillis(200));
                } catch (WakeupException e) {
                    break;
                }
                for (ConsumerRecord<byte[], byte[]> r : rs) {
                    emit(rec(r));
                    n++;
                }
                if (!rs.isEmpty()) {
                    try {
                        c.commitSync();
                    } catch (WakeupException e) {
                        c.commitSync();
                        break;
                    } catch (RebalanceInProgressException | CommitFailedException e) {
                        // a classic group rebalancing: the next poll completes it, and the
                        // revoke callback commits what this member is giving up
                        System.err.println("commit during a rebalance, carrying on: " + e);
                    }
                }
            }
        } finally {
            c.close();
        }
        emit("{\"ev\":\"closed\"}");
        System.exit(0);
    }
}
