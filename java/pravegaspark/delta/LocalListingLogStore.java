package pravegaspark.delta;

import java.io.File;
import java.io.FileNotFoundException;
import java.io.IOException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Iterator;
import java.util.List;

import io.delta.storage.HDFSLogStore;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.LocalFileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RawLocalFileSystem;

/**
 * Delta's log store for the local file system ({@link HDFSLogStore}: its commits are Delta's
 * own), with a listing whose cost does not grow with the log.
 *
 * <p>Delta lists {@code _delta_log} from a version on (the newest checkpoint's) every time it
 * updates a table's snapshot. Its store asks Hadoop for the status of every file in the
 * folder and keeps those at or after the version: a path object and a {@code stat} per file,
 * every commit's JSON and checksum files included, however old. Delta removes old log files only
 * at a checkpoint and only those written before the day its log retention began (30 days by
 * default), so a table that takes many small commits, like a store's own tables, lists a folder
 * that keeps growing: an operation on a store aged by 300 control operations (600 commits) ran 1.5x slower
 * than on a fresh one, most of the difference in this listing (a profile).
 *
 * <p>This store reads the folder's names alone (one directory read, no {@code stat}), keeps
 * those at or after the version, and asks for the status of those only. Hadoop's hidden checksum
 * files ({@code .N.json.crc}) are left out, as Hadoop's listing leaves them out. What it returns,
 * and in what order, is what Delta's own listing returns; a file removed in between (log
 * clean-up) is left out, as a listing made a moment later would. A missing folder is Delta's
 * {@code FileNotFoundException} (no table); a folder that cannot be read is an
 * {@code IOException}, never taken for a missing one.
 *
 * <p>Use: {@code spark.delta.logStore.file.impl=pravegaspark.delta.LocalListingLogStore}, with
 * this class's jar on the class path.
 */
public class LocalListingLogStore extends HDFSLogStore {
    public LocalListingLogStore(Configuration hadoopConf) {
        super(hadoopConf);
    }

    @Override
    public Iterator<FileStatus> listFrom(Path path, Configuration hadoopConf) throws IOException {
        FileSystem fs = path.getFileSystem(hadoopConf);
        Path parent = path.getParent();
        File folder = localFile(fs, parent);
        if (folder == null || !folder.isDirectory()) {  // not a local folder: Delta's listing (and its errors)
            return super.listFrom(path, hadoopConf);
        }
        String[] names = folder.list();
        if (names == null) {
            if (!folder.exists()) {  // removed since: no table, as Delta's listing would say
                throw new FileNotFoundException("No such file or directory: " + parent);
            }
            // there but unreadable (no descriptor left, no permission): an error, not "no table"
            throw new IOException("cannot read the names in " + parent);
        }
        List<String> kept = kept(path.getName(), fs instanceof LocalFileSystem, names);
        List<FileStatus> listed = new ArrayList<>(kept.size());
        for (String name : kept) {
            try {  // the child as Hadoop builds it (a name with a colon is not a URI scheme)
                listed.add(fs.getFileStatus(new Path(parent, new Path(null, null, name))));
            } catch (FileNotFoundException removed) {
                // removed since the folder was read (log clean-up): as if listed a moment later
            }
        }
        return listed.iterator();
    }

    /** The folder as a local file, or null when {@code fs} is not a local file system. */
    private static File localFile(FileSystem fs, Path folder) {
        if (fs instanceof LocalFileSystem) {
            return ((LocalFileSystem) fs).pathToFile(folder);
        }
        if (fs instanceof RawLocalFileSystem) {
            return ((RawLocalFileSystem) fs).pathToFile(folder);
        }
        return null;
    }

    /** Hadoop's hidden checksum file of another file ({@code .name.crc}). */
    static boolean isChecksumFile(String name) {
        return name.startsWith(".") && name.endsWith(".crc");
    }

    /**
     * The names a listing from {@code start} keeps, in order: those at or after it, without the
     * checksum files when {@code checksummed} (Hadoop's {@code LocalFileSystem} hides them; its
     * raw file system does not).
     */
    static List<String> kept(String start, boolean checksummed, String... names) {
        List<String> kept = new ArrayList<>();
        for (String name : Arrays.asList(names)) {
            if (name.compareTo(start) >= 0 && !(checksummed && isChecksumFile(name))) {
                kept.add(name);
            }
        }
        kept.sort(null);
        return kept;
    }
}
