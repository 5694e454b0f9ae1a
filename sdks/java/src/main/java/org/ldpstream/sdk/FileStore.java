package org.ldpstream.sdk;

import java.io.File;
import java.io.FileInputStream;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.RandomAccessFile;
import java.nio.channels.FileChannel;
import java.nio.channels.FileLock;
import java.nio.charset.Charset;
import java.security.SecureRandom;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentMap;
import java.util.concurrent.locks.ReentrantLock;

/**
 * The device store in a file. Every update takes a lock per path inside the JVM and an
 * exclusive {@link FileLock} on {@code <file>.lock} between processes (a POSIX record lock on
 * Linux and Android: the lock the Python SDK takes too), reads the file, applies the change
 * and replaces the file atomically (a temporary file, fsync, rename), readable by the app
 * only. A lock is released by the system when its process dies.
 */
public final class FileStore extends DeviceStore {
  private static final Charset UTF8 = Charset.forName("UTF-8");
  private static final ConcurrentMap<String, ReentrantLock> LOCKS =
      new ConcurrentHashMap<String, ReentrantLock>();
  private final File file;
  private final File lockFile;
  private final ReentrantLock jvmLock;

  public FileStore(File file) {
    this(file, QUEUE_LIMIT);
  }

  public FileStore(File file, int queueLimit) {
    super(queueLimit);
    this.file = file.getAbsoluteFile();
    this.lockFile = new File(this.file.getPath() + ".lock");
    String key;
    try {
      key = this.file.getCanonicalPath();
    } catch (IOException e) {
      key = this.file.getPath();
    }
    ReentrantLock fresh = new ReentrantLock();
    ReentrantLock had = LOCKS.putIfAbsent(key, fresh);
    this.jvmLock = had != null ? had : fresh;
  }

  /** The store file. */
  public File file() {
    return file;
  }

  @Override
  public String toString() {
    return "FileStore(" + file + ")";
  }

  @Override
  public <T> T update(Update<T> fn) throws IOException {
    File dir = file.getParentFile();
    if (dir != null && !dir.isDirectory()) {
      if (!dir.mkdirs() && !dir.isDirectory()) {
        throw new IOException("cannot create " + dir);
      }
      Platform.privateDir(dir);
    }
    jvmLock.lock();
    try (RandomAccessFile raf = new RandomAccessFile(lockFile, "rw");
         FileChannel ch = raf.getChannel();
         FileLock lock = ch.lock()) {
      String text = file.exists() ? read(file) : null;
      Map<String, Object> doc = parse(text, file.getPath());
      String before = Json.write(doc);
      T out = fn.apply(doc);
      String after = Json.write(doc);
      if (!after.equals(before)) {
        write(after);
      }
      return out;
    } finally {
      jvmLock.unlock();
    }
  }

  private static String read(File f) throws IOException {
    try (InputStream in = new FileInputStream(f)) {
      return new String(Io.readAll(in), UTF8);
    }
  }

  private void write(String text) throws IOException {
    byte[] rnd = new byte[8];
    new SecureRandom().nextBytes(rnd);
    File tmp = new File(file.getPath() + "." + Hex.encode(rnd) + ".tmp");
    try {
      try (FileOutputStream out = new FileOutputStream(tmp)) {
        Platform.privateFile(tmp);
        out.write(text.getBytes(UTF8));
        out.getFD().sync();
      }
      if (!tmp.renameTo(file)) {
        // Windows will not rename over an existing file; the lock keeps readers out meanwhile
        if (!file.delete() || !tmp.renameTo(file)) {
          throw new IOException("cannot replace " + file);
        }
      }
    } finally {
      if (tmp.exists() && !tmp.delete()) {
        tmp.deleteOnExit();
      }
    }
  }
}
