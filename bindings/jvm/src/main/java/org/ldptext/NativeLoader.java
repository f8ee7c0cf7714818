package org.ldptext;

import java.io.File;
import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import java.util.Locale;

/**
 * Loads libldptext_jni, in this order:
 *
 * <ol>
 *   <li>the file named by the system property {@code ldptext.jni.library}, if set;
 *   <li>{@code libldptext_jni.so} in a directory of {@code java.library.path}, if one holds it (an
 *       app that ships its own build, or a distribution's package, overrides the jar's copy);
 *   <li>on Android, {@code System.loadLibrary} (the APK's {@code lib/<ABI>/});
 *   <li>the copy inside the jar for this os.name and os.arch ({@code linux-x86_64},
 *       {@code linux-aarch64}): extracted to a new private temporary file (in
 *       {@code ldptext.jni.tmpdir}, else {@code java.io.tmpdir}), loaded, then deleted (the
 *       mapping stays; nothing is left behind).
 * </ol>
 *
 * The jar's copies link libldptext, libsodium and utf8proc statically: they need only glibc.
 */
final class NativeLoader {
    static final String LIBRARY_PROPERTY = "ldptext.jni.library";
    static final String TMPDIR_PROPERTY = "ldptext.jni.tmpdir";
    private static final String NAME = "ldptext_jni";

    private static String origin;

    private NativeLoader() {}

    /** Where the library was loaded from (see {@link LdpText#nativeLibrary()}). */
    static synchronized String origin() {
        return origin;
    }

    static synchronized void load() {
        if (origin != null) return;
        String explicit = System.getProperty(LIBRARY_PROPERTY);
        if (explicit != null && !explicit.isEmpty()) {
            String path = new File(explicit).getAbsolutePath();
            System.load(path);
            origin = path;
            return;
        }
        String file = System.mapLibraryName(NAME);
        String searchPath = System.getProperty("java.library.path", "");
        for (String dir : searchPath.split(File.pathSeparator)) {
            if (dir.isEmpty()) continue;
            File candidate = new File(dir, file);
            if (candidate.isFile()) {
                String path = candidate.getAbsolutePath();
                System.load(path);
                origin = path;
                return;
            }
        }
        if (isAndroid()) { // the APK's lib/<ABI>/, which need not be extracted to a directory
            System.loadLibrary(NAME);
            origin = "System.loadLibrary(" + NAME + ")";
            return;
        }
        String platform = platform();
        String resource = "/org/ldptext/native/" + platform + "/" + file;
        InputStream in = NativeLoader.class.getResourceAsStream(resource);
        if (in == null) {
            throw new UnsatisfiedLinkError("ldptext: the jar has no native library for " + platform
                    + " (it carries linux-x86_64 and linux-aarch64): build bindings/jvm/jni/ldptext_jni.c"
                    + " for this platform and name the file with -D" + LIBRARY_PROPERTY + "=/path/" + file);
        }
        Path tmp = null;
        try {
            try {
                String dir = System.getProperty(TMPDIR_PROPERTY);
                if (dir == null || dir.isEmpty()) dir = System.getProperty("java.io.tmpdir");
                // createTempFile: a new file of a random name, owner-only (0600) on POSIX
                tmp = Files.createTempFile(Paths.get(dir), "ldptext_jni-", ".so");
                Files.copy(in, tmp, StandardCopyOption.REPLACE_EXISTING);
            } finally {
                in.close();
            }
            try {
                System.load(tmp.toAbsolutePath().toString());
            } catch (UnsatisfiedLinkError e) {
                UnsatisfiedLinkError wrapped = new UnsatisfiedLinkError("ldptext: could not load the jar's "
                        + platform + " library from " + tmp + " (a noexec temporary directory? set -D"
                        + TMPDIR_PROPERTY + "=DIR): " + e.getMessage());
                wrapped.initCause(e);
                throw wrapped;
            }
            origin = "bundled:" + platform;
        } catch (IOException e) {
            UnsatisfiedLinkError wrapped = new UnsatisfiedLinkError("ldptext: could not extract the jar's "
                    + platform + " library (set -D" + TMPDIR_PROPERTY + "=DIR to a writable directory): " + e);
            wrapped.initCause(e);
            throw wrapped;
        } finally {
            if (tmp != null) {
                try {
                    Files.deleteIfExists(tmp); // a loaded library stays mapped after its file is gone
                } catch (IOException e) {
                    tmp.toFile().deleteOnExit();
                }
            }
        }
    }

    /** linux-x86_64, linux-aarch64, ...: the jar's folder name for this JVM. */
    static String platform() {
        String os = System.getProperty("os.name", "").toLowerCase(Locale.ROOT);
        String arch = System.getProperty("os.arch", "").toLowerCase(Locale.ROOT);
        if (os.startsWith("linux")) os = "linux";
        else if (os.startsWith("mac") || os.startsWith("darwin")) os = "macos";
        else if (os.startsWith("windows")) os = "windows";
        if (arch.equals("amd64") || arch.equals("x86_64") || arch.equals("x64")) arch = "x86_64";
        else if (arch.equals("aarch64") || arch.equals("arm64")) arch = "aarch64";
        return os + "-" + arch;
    }

    private static boolean isAndroid() {
        return "Dalvik".equals(System.getProperty("java.vm.name"))
                || System.getProperty("java.vendor", "").contains("Android");
    }
}
