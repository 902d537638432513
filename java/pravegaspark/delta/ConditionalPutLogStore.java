package pravegaspark.delta;

import java.io.IOException;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.util.Iterator;

import io.delta.storage.HadoopFileSystemLogStore;
import org.apache.hadoop.conf.Configuration;
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
            try (OutputStream out = fs.create(path, true)) {
                writeLines(out, actions);
            }
            return;
        }
        FSDataOutputStreamBuilder<?, ?> builder = fs.createFile(path).overwrite(false).recursive();
        builder.must(CONDITIONAL_CREATE, true);
        try {
            try (OutputStream out = builder.build()) {
                writeLines(out, actions);
            }
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

    private static void writeLines(OutputStream out, Iterator<String> actions) throws IOException {
        while (actions.hasNext()) {
            out.write((actions.next() + "\n").getBytes(StandardCharsets.UTF_8));
        }
    }

    /** A conditional PUT that lost (HTTP 412), or a file found before the PUT. */
    static boolean isLostRace(Throwable e) {
        for (Throwable t = e; t != null; t = t.getCause()) {
            String name = t.getClass().getName();
            String text = String.valueOf(t.getMessage());
            if (name.endsWith("FileAlreadyExistsException") || name.endsWith("RemoteFileChangedException")
                    || text.contains("412") || text.contains("PreconditionFailed")) {
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
