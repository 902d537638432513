package pravegaspark.delta;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.Iterator;

import io.delta.storage.HadoopFileSystemLogStore;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.Abortable;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.FSDataOutputStreamBuilder;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;

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
 * <p>Use: {@code spark.delta.logStore.s3a.impl=pravegaspark.delta.ConditionalPutLogStore} (and
 * {@code .s3.impl}), with this class's jar on the class path.
 */
public class ConditionalPutLogStore extends HadoopFileSystemLogStore {
    /** Hadoop's create-file option for put-if-absent (FS_OPTION_CREATE_CONDITIONAL_OVERWRITE). */
    public static final String CONDITIONAL_CREATE = "fs.option.create.conditional.overwrite";

    public ConditionalPutLogStore(Configuration hadoopConf) {
        super(hadoopConf);
    }

    @Override
    public void write(Path path, Iterator<String> actions, Boolean overwrite, Configuration hadoopConf)
            throws IOException {
        FileSystem fs = path.getFileSystem(hadoopConf);
        if (overwrite) {
            writeWhole(fs.create(path, true), actions);
            return;
        }
        FSDataOutputStreamBuilder<?, ?> builder = fs.createFile(path).overwrite(false).recursive();
        builder.must(CONDITIONAL_CREATE, true);
        try {
            writeWhole(builder.build(), actions);
        } catch (IOException e) {
            if (isLostRace(e)) {
                java.nio.file.FileAlreadyExistsException lost =
                        new java.nio.file.FileAlreadyExistsException(path.toString());
                lost.initCause(e);
                throw lost;
            }
            throw e;
        }
    }

    /**
     * Write every action, one per line, then close: on S3 the close is the (conditional) PUT. If
     * writing fails part-way the stream is aborted, never closed, so no partial file is uploaded.
     */
    private static void writeWhole(FSDataOutputStream out, Iterator<String> actions) throws IOException {
        try {
            while (actions.hasNext()) {
                out.write((actions.next() + "\n").getBytes(StandardCharsets.UTF_8));
            }
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
    public Boolean isPartialWriteVisible(Path path, Configuration hadoopConf) {
        return false;  // an object appears whole when its PUT completes
    }
}
