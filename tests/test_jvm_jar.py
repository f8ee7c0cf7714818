"""The JVM binding as a user consumes it: one jar from ``make jvm`` (bindings/jvm/Makefile) that carries
libldptext_jni.so for linux-x86_64 and linux-aarch64, statically linked, and loads the right one
itself; its POM and the file:// Maven repository build/maven/.

* The jar: both libraries, each needing only libc/libm (no libsodium, no libutf8proc) and exporting
  only JNI symbols; the project version in the manifest; the POM inside.
* build/maven/: the Maven layout of org.ldptext:ldptext:VERSION with checksums that match.
* A program outside the project, compiled with javac against the jar found by its coordinate in
  build/maven/, run with no java.library.path: it loads the jar's own copy, sanitizes with a bundle
  (the Python runtime's seeded output, byte for byte) and no libsodium or libutf8proc is mapped into
  the process; where root and ``unshare`` exist, again with every system copy of both libraries
  covered by /dev/null (tests/test_wheel.py's namespace). Nothing is left in the temporary folder.
* -Dldptext.jni.library and java.library.path still override the jar's copy.
* A Maven project outside the project depends on org.ldptext:ldptext:VERSION through build/maven/ as
  a file:// repository and compiles offline (its plugins from Debian's /usr/share/maven-repo, a
  fresh local repository: nothing from ~/.m2); the program runs against the jar Maven resolved.
* The aarch64 library, taken out of the jar, runs under qemu-aarch64: a cross-compiled harness
  (tests/jvm/fake_jni.c, a JNIEnv of its own) dlopen()s it, calls JNI_OnLoad and the entry points
  LdpText uses, and gets the C library's version, the Python runtime's seeded output and the
  refusal of a stranger's key (-43). The same harness on the x86-64 library is the control.

Skipped, with the reason, without a JDK (LDPTEXT_REQUIRE_JVM=1 fails instead), without Maven or its
Debian plugins (the same flag), without the cross toolchain or qemu (LDPTEXT_REQUIRE_ARM64=1), and
the covered run without root or unshare.
"""
from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

from conftest import load_seeded, require_tool
from test_jvm import ROOT, _tool, bundles, clib, dev_key, jdk, jvm_build  # noqa: F401

MAVEN_REPO = ROOT / "build" / "maven"
DEBIAN_MAVEN_REPO = Path("/usr/share/maven-repo")
TEXT = "w1 w2 w3 w4 w5 w6 w7 w8"
SEED = 20240611
ALLOWED_NEEDED = {"libc.so.6", "libm.so.6", "ld-linux-aarch64.so.1", "ld-linux-x86-64.so.2"}


def project_version() -> str:
    text = (ROOT / "sdk" / "ldptext" / "__init__.py").read_text(encoding="utf-8")
    return re.search(r'^__version__ = "(.*)"$', text, re.M).group(1)


def artifact(version: str, suffix: str = ".jar") -> Path:
    return MAVEN_REPO / "org" / "ldptext" / "ldptext" / version / f"ldptext-{version}{suffix}"


def _readelf() -> str:
    return require_tool(["readelf"], "binutils' readelf reads the libraries (Debian: binutils)",
                        "LDPTEXT_REQUIRE_JVM")


def extract_native(jar: Path, platform: str, dest: Path) -> Path:
    with zipfile.ZipFile(jar) as z:
        data = z.read(f"org/ldptext/native/{platform}/libldptext_jni.so")
    out = dest / f"{platform}-libldptext_jni.so"
    out.write_bytes(data)
    return out


def has_aarch64(jar: Path) -> bool:
    with zipfile.ZipFile(jar) as z:
        return "org/ldptext/native/linux-aarch64/libldptext_jni.so" in z.namelist()


def require_arm64(jar: Path, *tools: str) -> dict[str, str]:
    """The cross tools, and the jar's aarch64 library (make jvm leaves it out without the toolchain)."""
    why = "the aarch64 library needs Debian's gcc-aarch64-linux-gnu, qemu-user and the arm64 libsodium-dev / " \
          "libutf8proc-dev (scripts/system-deps.sh arm64)"
    found = {t: require_tool([t], why, "LDPTEXT_REQUIRE_ARM64") for t in tools}
    if not has_aarch64(jar):
        if os.environ.get("LDPTEXT_REQUIRE_ARM64") == "1":
            pytest.fail("the jar has no linux-aarch64 library (LDPTEXT_REQUIRE_ARM64=1)")
        pytest.skip("make jvm built no linux-aarch64 library here: " + why)
    return found


def test_the_jar_carries_static_natives_and_its_version(jvm_build, tmp_path):  # noqa: F811
    readelf = _readelf()
    jar = jvm_build / "ldptext.jar"
    version = project_version()
    with zipfile.ZipFile(jar) as z:
        manifest = z.read("META-INF/MANIFEST.MF").decode()
        pom = z.read("META-INF/maven/org.ldptext/ldptext/pom.xml").decode()
    assert re.search(rf"^Implementation-Version: {re.escape(version)}\r?$", manifest, re.M), manifest
    assert f"<version>{version}</version>" in pom and "<artifactId>ldptext</artifactId>" in pom
    platforms = ["linux-x86_64"] + (["linux-aarch64"] if has_aarch64(jar) else [])
    for platform in platforms:
        so = extract_native(jar, platform, tmp_path)
        dyn = subprocess.run([readelf, "-d", "-W", str(so)], capture_output=True, text=True, check=True).stdout
        needed = set(re.findall(r"\(NEEDED\)\s+Shared library: \[(.+?)\]", dyn))
        assert needed and needed <= ALLOWED_NEEDED, (platform, needed)  # libsodium, utf8proc: linked in
        syms = subprocess.run([readelf, "--dyn-syms", "-W", str(so)], capture_output=True, text=True,
                              check=True).stdout
        exported = [ln.split()[-1] for ln in syms.splitlines()
                    if " FUNC " in ln and " GLOBAL " in ln and " UND " not in ln]
        assert exported and all(n.startswith(("Java_org_ldptext_", "JNI_On")) for n in exported), exported
        header = so.read_bytes()[:20]
        assert int.from_bytes(header[18:20], "little") == (62 if platform.endswith("x86_64") else 183)
    if "linux-aarch64" not in platforms:
        require_arm64(jar, "aarch64-linux-gnu-gcc")


def test_the_maven_repository_layout(jvm_build):  # noqa: F811
    version = project_version()
    jar, pom = artifact(version), artifact(version, ".pom")
    assert jar.read_bytes() == (jvm_build / "ldptext.jar").read_bytes()
    for f in (jar, pom, artifact(version, "-sources.jar"), MAVEN_REPO / "org/ldptext/ldptext/maven-metadata.xml"):
        data = f.read_bytes()
        for algo in ("sha1", "md5", "sha256"):
            assert Path(f"{f}.{algo}").read_text().strip() == hashlib.new(algo, data).hexdigest(), (f, algo)
    text = pom.read_text()
    for tag, value in (("groupId", "org.ldptext"), ("artifactId", "ldptext"), ("version", version),
                       ("packaging", "jar")):
        assert f"<{tag}>{value}</{tag}>" in text
    assert "<dependency>" not in text  # the natives are inside: nothing else to resolve
    with zipfile.ZipFile(artifact(version, "-sources.jar")) as z:
        assert "org/ldptext/LdpText.java" in z.namelist()


# the consumer's program: opens the bundle, sanitizes (seeded, to compare with Python) and reports
# where the JNI library came from and which libsodium / libutf8proc files the process mapped
APP = r"""
package app;

import java.nio.file.*;
import java.util.*;
import org.ldptext.*;

public final class App {
    public static void main(String[] args) throws Exception {
        byte[] key = Base64.getDecoder().decode(args[1]);
        System.out.println("library " + LdpText.nativeLibrary());
        String jarVersion = LdpText.class.getPackage().getImplementationVersion(); // the manifest's
        System.out.println("version " + LdpText.version() + " " + jarVersion);
        try (LdpText ldp = LdpText.openSeededForTests(Paths.get(args[0]), Long.parseLong(args[2]), key)) {
            System.out.println("text " + ldp.sanitize(args[3]).text());
        }
        try (LdpText ldp = LdpText.open(Paths.get(args[0]), key)) {
            System.out.println("tokens " + ldp.sanitize(args[3]).report().tokens());
        }
        Set<String> mapped = new TreeSet<>();
        for (String line : Files.readAllLines(Paths.get("/proc/self/maps"))) {
            if (line.contains("libsodium") || line.contains("libutf8proc")) mapped.add(line.trim());
        }
        System.out.println("mapped " + mapped);
    }
}
"""


def _expected(bundle: Path) -> str:
    san = load_seeded(bundle, seed=SEED)
    try:
        return san.sanitize(TEXT).text
    finally:
        san.close()


def _check_app_output(out: str, clib, bundle: Path, library: str) -> None:  # noqa: F811
    lines = out.splitlines()
    assert f"library {library}" in lines, out
    assert f"version {clib.lib.ldp_version().decode()} {project_version()}" in lines, out
    assert f"text {_expected(bundle)}" in lines, out
    assert "tokens 8" in lines, out
    assert "mapped []" in lines, out  # nothing of the system's libsodium / libutf8proc in the process


def _compile_app(jdk, work: Path, classpath: Path) -> Path:  # noqa: F811
    src = work / "src" / "app"
    src.mkdir(parents=True)
    (src / "App.java").write_text(APP, encoding="utf-8")
    classes = work / "classes"
    done = subprocess.run([jdk["javac"], "-Werror", "-Xlint:all", "-encoding", "UTF-8", "-cp", str(classpath),
                           "-d", str(classes), str(src / "App.java")], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    return classes


def _clean_env(home: Path) -> dict[str, str]:
    """No LD_LIBRARY_PATH, no JAVA_TOOL_OPTIONS: the JVM finds what an app's JVM finds."""
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "LANG": "C.UTF-8"}


def test_a_javac_project_uses_the_jar_by_coordinate(jdk, jvm_build, clib, dev_key, bundles, tmp_path):  # noqa: F811
    import base64
    assert not tmp_path.resolve().is_relative_to(ROOT)
    jar = artifact(project_version())  # what a build tool fetches for org.ldptext:ldptext:VERSION
    classes = _compile_app(jdk, tmp_path, jar)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    bundle = bundles["santext+"]
    args = [str(bundle), base64.b64encode(dev_key).decode(), str(SEED), TEXT]
    cp = f"{jar}{os.pathsep}{classes}"
    done = subprocess.run([jdk["java"], "-Xcheck:jni", f"-Dldptext.jni.tmpdir={scratch}", "-cp", cp, "app.App",
                           *args], capture_output=True, text=True, timeout=120, env=_clean_env(tmp_path), cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    _check_app_output(done.stdout, clib, bundle, "bundled:linux-x86_64")
    assert list(scratch.iterdir()) == [], "the extracted library is deleted once loaded"

    # the overrides: a file named by the property, then a folder of java.library.path
    own = tmp_path / "own" / "libldptext_jni.so"
    own.parent.mkdir()
    shutil.copy(jvm_build / "libldptext_jni.so", own)
    for flag in (f"-Dldptext.jni.library={own}", f"-Djava.library.path={own.parent}"):
        done = subprocess.run([jdk["java"], flag, "-cp", cp, "app.App", *args], capture_output=True, text=True,
                              timeout=120, env=_clean_env(tmp_path), cwd=tmp_path)
        assert done.returncode == 0, done.stdout + done.stderr
        assert f"library {own}" in done.stdout.splitlines(), (flag, done.stdout)
    done = subprocess.run([jdk["java"], f"-Dldptext.jni.library={tmp_path}/none.so", "-cp", cp, "app.App", *args],
                          capture_output=True, text=True, timeout=120, env=_clean_env(tmp_path), cwd=tmp_path)
    assert done.returncode != 0 and "UnsatisfiedLinkError" in done.stderr, "a named file is never bypassed"


def test_with_the_system_libraries_covered(jdk, jvm_build, clib, dev_key, bundles, tmp_path):  # noqa: F811
    """The same program in a mount namespace where every system libsodium and libutf8proc is /dev/null."""
    import base64
    import sys

    from test_wheel import HIDE_AND_RUN, system_library_files
    why = None
    if os.geteuid() != 0:
        why = "covering the system libraries needs root (mount --bind in a mount namespace)"
    elif not shutil.which("unshare") or not shutil.which("mount"):
        why = "unshare or mount missing (Debian: util-linux, mount)"
    elif subprocess.run(["unshare", "--mount", "--propagation", "private", "true"]).returncode != 0:
        why = "unshare --mount is refused here"
    if why:
        if os.environ.get("LDPTEXT_REQUIRE_WHEEL") == "1":  # CI: the namespace is there (tests/test_wheel.py)
            pytest.fail(why)
        pytest.skip(why)
    libraries = system_library_files()
    assert libraries, "no system libsodium / libutf8proc: nothing would show the jar carries them"
    script = tmp_path / "hide_and_run.sh"
    script.write_text(HIDE_AND_RUN)
    env = {**_clean_env(tmp_path), "HIDE": " ".join(libraries)}
    host = [lib for lib in libraries if "aarch64" not in lib]
    # control: a covered library does not load in the namespace
    control = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", str(script), sys.executable,
                              "-c", "import ctypes, sys; ctypes.CDLL(sys.argv[1])", host[0]],
                             capture_output=True, text=True, env=env)
    assert control.returncode != 0 and "OSError" in control.stderr, control.stderr
    jar = artifact(project_version())
    classes = _compile_app(jdk, tmp_path, jar)
    bundle = bundles["santext+"]
    done = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", str(script), jdk["java"],
                           "-cp", f"{jar}{os.pathsep}{classes}", "app.App", str(bundle),
                           base64.b64encode(dev_key).decode(), str(SEED), TEXT],
                          capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    _check_app_output(done.stdout, clib, bundle, "bundled:linux-x86_64")


MAVEN_POM = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>example</groupId>
  <artifactId>app</artifactId>
  <version>1</version>
  <properties>
    <maven.compiler.release>8</maven.compiler.release>
    <project.build.sourceEncoding>UTF-8</project.build.sourceEncoding>
  </properties>
  <repositories>
    <repository>
      <id>ldptext-local</id>
      <url>{repo}</url>
      <releases><checksumPolicy>fail</checksumPolicy></releases>
    </repository>
  </repositories>
  <dependencies>
    <dependency><groupId>org.ldptext</groupId><artifactId>ldptext</artifactId><version>{version}</version></dependency>
  </dependencies>
  <build>
    <plugins>
      <plugin><groupId>org.apache.maven.plugins</groupId><artifactId>maven-resources-plugin</artifactId>
        <version>{resources}</version></plugin>
      <plugin><groupId>org.apache.maven.plugins</groupId><artifactId>maven-compiler-plugin</artifactId>
        <version>{compiler}</version></plugin>
    </plugins>
  </build>
</project>
"""

# a fresh local repository; every repository but ours is Debian's copy of the plugins (no network)
MAVEN_SETTINGS = """<settings>
  <localRepository>{local}</localRepository>
  <offline>false</offline>
  <mirrors>
    <mirror><id>debian</id><mirrorOf>*,!ldptext-local</mirrorOf><url>{seed}</url></mirror>
  </mirrors>
</settings>
"""


def _debian_plugin(name: str) -> str | None:
    """The newest version of a Maven plugin in Debian's repository that has its jar."""
    folder = DEBIAN_MAVEN_REPO / "org" / "apache" / "maven" / "plugins" / name
    found = [d.name for d in folder.glob("*") if re.fullmatch(r"[0-9.]+", d.name)
             and (d / f"{name}-{d.name}.jar").exists()] if folder.is_dir() else []
    return max(found, key=lambda v: tuple(int(x) for x in v.split(".")), default=None)


def test_a_maven_project_depends_on_it_by_coordinate(jdk, jvm_build, clib, dev_key, bundles, tmp_path):  # noqa: F811
    import base64
    mvn = require_tool(["mvn"], "Maven is needed (Debian: maven; scripts/system-deps.sh jvm)", "LDPTEXT_REQUIRE_JVM")
    resources, compiler = _debian_plugin("maven-resources-plugin"), _debian_plugin("maven-compiler-plugin")
    if not (resources and compiler):
        why = ("Debian's Maven plugins are missing from /usr/share/maven-repo (Debian: libmaven-resources-plugin-java "
               "libmaven-compiler-plugin-java junit5; scripts/system-deps.sh jvm): Maven cannot compile offline")
        if os.environ.get("LDPTEXT_REQUIRE_JVM") == "1":
            pytest.fail(why)
        pytest.skip(why)
    version = project_version()
    project = tmp_path / "app"
    (project / "src" / "main" / "java" / "app").mkdir(parents=True)
    (project / "src" / "main" / "java" / "app" / "App.java").write_text(APP, encoding="utf-8")
    (project / "pom.xml").write_text(MAVEN_POM.format(repo=MAVEN_REPO.as_uri(), version=version,
                                                      resources=resources, compiler=compiler))
    local = tmp_path / "m2"
    settings = tmp_path / "settings.xml"
    settings.write_text(MAVEN_SETTINGS.format(local=local, seed=DEBIAN_MAVEN_REPO.as_uri()))
    done = subprocess.run([mvn, "-B", "-q", "-s", str(settings), "compile"],
                          capture_output=True, text=True, timeout=300, cwd=project,
                          env={**_clean_env(tmp_path), "JAVA_HOME": str(Path(jdk["javac"]).resolve().parents[1])})
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    resolved = local / "org" / "ldptext" / "ldptext" / version / f"ldptext-{version}.jar"
    assert resolved.read_bytes() == artifact(version).read_bytes(), "Maven fetched the jar by its coordinate"
    bundle = bundles["santext+"]
    done = subprocess.run([jdk["java"], "-cp", f"{resolved}{os.pathsep}{project / 'target' / 'classes'}", "app.App",
                           str(bundle), base64.b64encode(dev_key).decode(), str(SEED), TEXT],
                          capture_output=True, text=True, timeout=120, env=_clean_env(tmp_path), cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    _check_app_output(done.stdout, clib, bundle, "bundled:linux-x86_64")


def _build_harness(cc: str, out: Path, jdk) -> Path:  # noqa: F811
    java_home = Path(jdk["javac"]).resolve().parents[1]
    done = subprocess.run([cc, "-std=c99", "-Wall", "-Wextra", "-Werror", f"-I{java_home}/include",
                           f"-I{java_home}/include/linux", str(ROOT / "tests" / "jvm" / "fake_jni.c"), "-o",
                           str(out), "-ldl"], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    return out


def test_the_aarch64_library_runs_under_qemu(jdk, jvm_build, clib, dev_key, bundles, tmp_path):  # noqa: F811
    jar = jvm_build / "ldptext.jar"
    tools = require_arm64(jar, "aarch64-linux-gnu-gcc", "qemu-aarch64")
    cc = require_tool(["cc", "gcc"], "a C compiler builds the x86-64 control", "LDPTEXT_REQUIRE_JVM")
    bundle = bundles["santext+"]
    expected = ["version " + clib.lib.ldp_version().decode(), "text " + _expected(bundle), "tokens 8", "refused -43"]
    args = [str(bundle), dev_key.hex(), str(SEED), TEXT]
    # control: the harness drives the x86-64 library to the same lines
    x86 = _build_harness(cc, tmp_path / "fake_jni-x86_64", jdk)
    done = subprocess.run([str(x86), str(extract_native(jar, "linux-x86_64", tmp_path)), *args],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.splitlines() == expected, done.stdout + done.stderr
    arm = _build_harness(tools["aarch64-linux-gnu-gcc"], tmp_path / "fake_jni-aarch64", jdk)
    so = extract_native(jar, "linux-aarch64", tmp_path)
    # the loader and libc of one glibc build: Debian's arm64 libc6 (multiarch, which the arm64 libsodium-dev
    # brings) where present, else the cross toolchain's; qemu-user falls back to the host's paths for
    # what the prefix lacks, and a loader of one build with a libc of another hangs in pthread_create
    prefix = "/" if Path("/lib/ld-linux-aarch64.so.1").exists() else "/usr/aarch64-linux-gnu"
    done = subprocess.run([tools["qemu-aarch64"], "-L", prefix, str(arm), str(so), *args],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines() == expected, done.stdout + done.stderr
