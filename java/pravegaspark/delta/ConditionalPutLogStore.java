package pravegaspark.delta;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Iterator;
import java.util.List;
import java.util.TreeSet;
import java.util.concurrent.atomic.AtomicLong;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import io.delta.storage.HadoopFileSystemLogStore;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.Abortable;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.FSDataOutputStreamBuilder;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A Delta log store for object stores that commits {@code _delta_log/N.json} with put-if-absent:
 * S3A's conditional create ({@code If-None-Match: *}, Hadoop 3.4.2+), which AWS S3 has honoured
 * since 2024. Of several processes writing the same log version, exactly one succeeds; the others
 * get {@link java.nio.file.FileAlreadyExistsException}, which Delta treats as a lost commit race:
 * it checks the winner's commit for conflicts and retries at the next version, or raises its
 * concurrent-modification exception.
 *
 * <p>Delta's default S3 log store checks for the file and then writes it, two steps that exclude
 * other writers only inside one JVM: two processes can both "succeed", the later file replacing
 * the earlier (a lost commit).
 *
 * <p>Two failures of the store or the network are absorbed here:
 * <ul>
 *   <li>A conditional PUT whose response was lost and which the client sent again: the second
 *   attempt gets 412 for the object the first one wrote. A refused commit is therefore compared
 *   with the object that holds the version; when it holds exactly the bytes of this commit, the
 *   commit is ours and succeeded (reporting a lost race would make Delta commit it a second time
 *   at the next version).</li>
 *   <li>A listing that leaves out log files that are there (a store whose LIST is cut short):
 *   when the listed {@code N.json} versions have a gap, the directory is listed again, up to
 *   {@value #DEFAULT_LIST_RETRIES} times {@value #DEFAULT_LIST_RETRY_WAIT_MS} ms apart
 *   ({@link #LIST_RETRIES}, {@link #LIST_RETRY_WAIT_MS}), with a warning each time. A gap that
 *   stays is returned as listed: Delta then reports it (DELTA_VERSIONS_NOT_CONTIGUOUS).</li>
 * </ul>
 *
 * <p>Use: {@code spark.delta.logStore.s3a.impl=pravegaspark.delta.ConditionalPutLogStore} (and
 * {@code .s3.impl}), with this class's jar on the class path.
 */
public class ConditionalPutLogStore extends HadoopFileSystemLogStore {
    /** Hadoop's create-file option for put-if-absent (FS_OPTION_CREATE_CONDITIONAL_OVERWRITE). */
    public static final String CONDITIONAL_CREATE = "fs.option.create.conditional.overwrite";
    /** How many times a listing with a gap in its log versions is listed again (Hadoop setting). */
    public static final String LIST_RETRIES = "pravegaspark.delta.logStore.listRetries";
    /** Milliseconds between those listings (Hadoop setting). */
    public static final String LIST_RETRY_WAIT_MS = "pravegaspark.delta.logStore.listRetryWaitMs";
    public static final int DEFAULT_LIST_RETRIES = 3;
    public static final long DEFAULT_LIST_RETRY_WAIT_MS = 100;

    private static final Logger LOG = LoggerFactory.getLogger(ConditionalPutLogStore.class);
    private static final Pattern DELTA_FILE = Pattern.compile("(\\d{20})\\.json");
    /** Classic, multi-part ({@code .0000000001.0000000002}) and V2 ({@code .<uuid>}) checkpoints. */
    private static final Pattern CHECKPOINT_FILE = Pattern.compile("(\\d{20})\\.checkpoint(\\.[^.]+(\\.[^.]+)?)?\\.(parquet|json)");
    private static final Pattern LISTING_START = Pattern.compile("(\\d{20}).*");

    private static final AtomicLong RELISTS = new AtomicLong();
    private static final AtomicLong OWN_COMMITS_REFUSED = new AtomicLong();

    public ConditionalPutLogStore(Configuration hadoopConf) {
        super(hadoopConf);
    }

    @Override
    public void write(Path path, Iterator<String> actions, Boolean overwrite, Configuration hadoopConf)
            throws IOException {
        byte[] content = serialize(actions);  // before any stream is opened: nothing to abort
        FileSystem fs = path.getFileSystem(hadoopConf);
        if (overwrite) {
            writeWhole(fs.create(path, true), content);
            return;
        }
        FSDataOutputStreamBuilder<?, ?> builder = fs.createFile(path).overwrite(false).recursive();
        builder.must(CONDITIONAL_CREATE, true);
        try {
            writeWhole(builder.build(), content);
        } catch (IOException e) {
            if (!isLostRace(e)) {
                throw e;
            }
            if (holds(fs, path, content, e)) {
                OWN_COMMITS_REFUSED.incrementAndGet();
                LOG.warn("{}: the store refused the put-if-absent, but the object holds exactly this commit's "
                        + "{} bytes (an earlier attempt of the same PUT succeeded): committed", path, content.length);
                return;
            }
            java.nio.file.FileAlreadyExistsException lost =
                    new java.nio.file.FileAlreadyExistsException(path.toString());
            lost.initCause(e);
            throw lost;
        }
    }

    /** Every action, one per line, as the file's bytes. */
    private static byte[] serialize(Iterator<String> actions) {
        ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        while (actions.hasNext()) {
            bytes.writeBytes((actions.next() + "\n").getBytes(StandardCharsets.UTF_8));
        }
        return bytes.toByteArray();
    }

    /**
     * Write the whole content, then close: on S3 the close is the (conditional) PUT. If writing
     * fails the stream is aborted, never closed, so no partial file is uploaded.
     */
    private static void writeWhole(FSDataOutputStream out, byte[] content) throws IOException {
        try {
            out.write(content);
        } catch (IOException | RuntimeException | Error e) {
            try {
                ((Abortable) out).abort();
            } catch (RuntimeException notAbortable) {  // a store without abort: the original error counts
                e.addSuppressed(notAbortable);
            }
            throw e;
        }
        out.close();
    }

    /**
     * Whether the object at {@code path} holds exactly {@code content}. A commit file carries its
     * commit's own identity (Delta's commitInfo has a random txnId and a timestamp; every added
     * file has a random name), so equal bytes mean this commit's own earlier attempt.
     *
     * @throws IOException the object could not be read: whether this commit landed is unknown,
     *     which is neither a success nor a lost race
     */
    private static boolean holds(FileSystem fs, Path path, byte[] content, IOException refusal) throws IOException {
        byte[] found;
        try (InputStream in = fs.open(path)) {
            found = in.readNBytes(content.length + 1);  // one more byte: a longer object differs
        } catch (IOException readFailed) {
            IOException unknown = new IOException(path + ": put-if-absent refused, and the object that holds "
                    + "this version could not be read to tell whether it is this commit", readFailed);
            unknown.addSuppressed(refusal);
            throw unknown;
        }
        return Arrays.equals(found, content);
    }

    /**
     * A conditional PUT that lost (S3A's RemoteFileChangedException, or the SDK's HTTP 412
     * PreconditionFailed), or the file found by S3A's existence check before the PUT. Matched on
     * exception classes and the SDK's status text only: an object key may contain "412".
     */
    static boolean isLostRace(Throwable e) {
        for (Throwable t = e; t != null; t = t.getCause()) {
            String name = t.getClass().getName();
            String text = String.valueOf(t.getMessage());
            if (name.endsWith("FileAlreadyExistsException") || name.endsWith("RemoteFileChangedException")
                    || text.contains("Status Code: 412") || text.contains("PreconditionFailed")) {
                return true;
            }
        }
        return false;
    }

    @Override
    public Iterator<FileStatus> listFrom(Path path, Configuration hadoopConf) throws IOException {
        int retries = hadoopConf.getInt(LIST_RETRIES, DEFAULT_LIST_RETRIES);
        long waitMs = hadoopConf.getLong(LIST_RETRY_WAIT_MS, DEFAULT_LIST_RETRY_WAIT_MS);
        List<FileStatus> listed = listOnce(path, hadoopConf);
        for (int relist = 1; ; relist++) {
            String gap = gap(path, listed);
            if (gap == null) {
                break;
            }
            if (relist > retries) {
                LOG.warn("listing {}: {} after {} more listings; returning it as listed", path, gap, retries);
                break;
            }
            LOG.warn("listing {}: {}; listing again ({} of {})", path, gap, relist, retries);
            RELISTS.incrementAndGet();
            try {
                Thread.sleep(waitMs);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new java.io.InterruptedIOException("interrupted while listing " + path + " again");
            }
            listed = listOnce(path, hadoopConf);
        }
        return listed.iterator();
    }

    private List<FileStatus> listOnce(Path path, Configuration hadoopConf) throws IOException {
        List<FileStatus> listed = new ArrayList<>();
        super.listFrom(path, hadoopConf).forEachRemaining(listed::add);
        return TestHook.apply(path, listed);
    }

    /**
     * What is wrong with a listing of log files, or null: its {@code N.json} versions must be
     * contiguous from the newest checkpoint listed (the first after it being the checkpoint's
     * version + 1), else from the first one listed, which (with no checkpoint listed) must be the
     * version the listing starts from. Deltas below a checkpoint may be gone (log clean-up).
     */
    static String gap(Path from, List<FileStatus> listed) {
        TreeSet<Long> deltas = new TreeSet<>();
        long checkpoint = -1;
        for (FileStatus status : listed) {
            String name = status.getPath().getName();
            Matcher delta = DELTA_FILE.matcher(name);
            if (delta.matches()) {
                deltas.add(Long.parseLong(delta.group(1)));
                continue;
            }
            Matcher cp = CHECKPOINT_FILE.matcher(name);
            if (cp.matches()) {
                checkpoint = Math.max(checkpoint, Long.parseLong(cp.group(1)));
            }
        }
        long expected;
        if (checkpoint >= 0) {
            deltas = new TreeSet<>(deltas.tailSet(checkpoint + 1));
            expected = checkpoint + 1;
        } else {
            Matcher start = LISTING_START.matcher(from.getName());
            expected = start.matches() ? Long.parseLong(start.group(1)) : deltas.isEmpty() ? 0 : deltas.first();
        }
        if (deltas.isEmpty()) {
            return null;
        }
        for (long version : deltas) {
            if (version != expected) {
                return String.format("log version%s %s not listed, %d is%s",
                        version - expected > 1 ? "s" : "",
                        version - expected > 1 ? expected + " to " + (version - 1) : String.valueOf(expected),
                        version, checkpoint >= 0 ? " (checkpoint at " + checkpoint + ")" : "");
            }
            expected++;
        }
        return null;
    }

    /** Listings made again because their log versions had a gap, in this JVM. */
    public static long relists() {
        return RELISTS.get();
    }

    /** Commits whose put-if-absent was refused by their own earlier attempt, in this JVM. */
    public static long ownCommitsRefused() {
        return OWN_COMMITS_REFUSED.get();
    }

    /**
     * Tests only: the next {@code listings} listings of a log directory whose path contains
     * {@code dirContains} leave out {@code N.json} of {@code version}, as a store whose LIST is
     * cut short would. {@code listings} 0 turns it off.
     */
    public static void dropFromListings(String dirContains, long version, int listings) {
        TestHook.set(dirContains, version, listings);
    }

    private static final class TestHook {
        private static String dirContains;
        private static String dropped;
        private static int remaining;

        static synchronized void set(String dir, long version, int listings) {
            dirContains = dir;
            dropped = String.format("%020d.json", version);
            remaining = listings;
        }

        static synchronized List<FileStatus> apply(Path path, List<FileStatus> listed) {
            Path dir = path.getParent();
            if (remaining <= 0 || dir == null || !dir.toString().contains(dirContains)) {
                return listed;
            }
            List<FileStatus> kept = new ArrayList<>();
            for (FileStatus status : listed) {
                if (!status.getPath().getName().equals(dropped)) {
                    kept.add(status);
                }
            }
            if (kept.size() < listed.size()) {
                remaining--;
            }
            return kept;
        }
    }

    @Override
    public Boolean isPartialWriteVisible(Path path, Configuration hadoopConf) {
        return false;  // an object appears whole when its PUT completes
    }
}
