package kafkatest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Version is the Apache Kafka release pinned in pom.xml, the one the
// harness runs unless told otherwise.
const Version = "4.4.0"

// Version39 is the Kafka 3.x release pinned in pom-3.9.xml: the last 3.x
// line (KRaft; no share groups, KIP-848 groups and transactions v2 not
// enabled by default).
const Version39 = "3.9.1"

// Versions are the releases the harness runs ([Config.Version],
// RIFFLE_KAFKA=version).
var Versions = []string{Version, Version39}

//go:embed pom.xml pom-3.9.xml log4j2.properties log4j.properties
var files embed.FS

// release is how the harness runs one pinned Kafka release.
type release struct {
	version string
	// pom resolves the release's jars (embedded file name).
	pom string
	// log4j1: the release logs through reload4j (log4j 1.2, Kafka 3.x)
	// configured with log4j.properties, not log4j2 (Kafka 4).
	log4j1 bool
}

// major is the release's major version (3 or 4).
func (r release) major() int {
	m, _, _ := strings.Cut(r.version, ".")
	n, _ := strconv.Atoi(m)
	return n
}

// logConfig is the embedded logging configuration's file name.
func (r release) logConfig() string {
	if r.log4j1 {
		return "log4j.properties"
	}
	return "log4j2.properties"
}

// logFlag is the JVM flag that points the release's logging at path.
func (r release) logFlag(path string) string {
	if r.log4j1 {
		return "-Dlog4j.configuration=file:" + path
	}
	return "-Dlog4j2.configurationFile=" + path
}

// releaseOf returns how to run version, one of Versions.
func releaseOf(version string) (release, error) {
	switch version {
	case "", Version:
		return release{version: Version, pom: "pom.xml"}, nil
	case Version39:
		return release{version: Version39, pom: "pom-3.9.xml", log4j1: true}, nil
	}
	return release{}, fmt.Errorf("kafkatest: Kafka %s is not pinned (pinned: %s)", version, strings.Join(Versions, ", "))
}

// dependencyPlugin is pinned so a fresh machine resolves the same jars.
const dependencyPlugin = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy-dependencies"

// completeMarker, in the libs directory, holds the hash of the pom that
// resolved it: a directory without it (an interrupted copy) or with another
// hash (the pin moved) is resolved again.
const completeMarker = ".riffle-complete"

// extraMavenArgs is for tests (offline mode, an empty local repository).
var extraMavenArgs []string

// CacheDir is where Libs keeps the jars of Version: see CacheDirFor.
func CacheDir() (string, error) { return CacheDirFor(Version) }

// CacheDirFor is where LibsFor keeps the jars of version:
// $RIFFLE_KAFKA_CACHE/kafka-VERSION, or riffle/kafka-VERSION in the user's
// cache directory (os.UserCacheDir), outside any repository and shared by
// every checkout.
func CacheDirFor(version string) (string, error) {
	base := os.Getenv("RIFFLE_KAFKA_CACHE")
	if base == "" {
		d, err := os.UserCacheDir()
		if err != nil {
			return "", fmt.Errorf("kafkatest: no cache directory (set RIFFLE_KAFKA_CACHE): %w", err)
		}
		base = filepath.Join(d, "riffle")
	}
	return filepath.Join(base, "kafka-"+version), nil
}

// Libs returns the directory holding the jars of the Kafka broker of
// Version: see LibsFor.
func Libs(ctx context.Context) (string, error) { return LibsFor(ctx, Version) }

// LibsFor returns the directory holding the jars of the Kafka broker of
// version (one of Versions), resolving them with Maven (mvn, from Maven Central or the mirror in the
// user's settings) the first time and reusing them afterwards. Concurrent
// callers, in one process or several, are safe: each resolves into a
// directory of its own and the first to finish publishes it with a rename.
//
// Every failure is one line: java or mvn missing, a Java older than 17,
// or a repository that could not be reached (the full Maven output is kept
// in a file the line names).
func LibsFor(ctx context.Context, version string) (string, error) {
	rel, err := releaseOf(version)
	if err != nil {
		return "", err
	}
	version = rel.version
	if err := checkJava(ctx, version); err != nil {
		return "", err
	}
	dir, err := CacheDirFor(version)
	if err != nil {
		return "", err
	}
	pom, _ := files.ReadFile(rel.pom)
	sum := sha256.Sum256(pom)
	want := hex.EncodeToString(sum[:])
	libs := filepath.Join(dir, "libs")
	if complete(libs, want) {
		return libs, nil
	}
	mvn, err := exec.LookPath("mvn")
	if err != nil {
		return "", errors.New("kafkatest: mvn not found in PATH: install Apache Maven 3.8+ to fetch the Kafka " + version + " jars (or run the suite against RIFFLE_KAFKA_BROKERS)")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("kafkatest: %w", err)
	}
	tmp, err := os.MkdirTemp(dir, "resolve-")
	if err != nil {
		return "", fmt.Errorf("kafkatest: %w", err)
	}
	defer os.RemoveAll(tmp)
	pomPath := filepath.Join(tmp, "pom.xml")
	if err := os.WriteFile(pomPath, pom, 0o644); err != nil {
		return "", fmt.Errorf("kafkatest: %w", err)
	}
	out := filepath.Join(tmp, "libs")
	args := append([]string{"-B", "-q", "-Dstyle.color=never", "-f", pomPath}, extraMavenArgs...)
	args = append(args, dependencyPlugin, "-DincludeScope=runtime", "-DoutputDirectory="+out)
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, mvn, args...)
	cmd.Dir = tmp
	output, runErr := cmd.CombinedOutput()
	if runErr == nil {
		if _, err := os.Stat(filepath.Join(out, "kafka_2.13-"+version+".jar")); err != nil {
			runErr = errors.New("kafka_2.13-" + version + ".jar missing after the copy")
		}
	}
	if runErr != nil {
		logPath := filepath.Join(dir, "mvn.log")
		_ = os.WriteFile(logPath, output, 0o644)
		return "", fmt.Errorf("kafkatest: mvn could not resolve org.apache.kafka:kafka_2.13:%s (repository unreachable?): %s (full output: %s)",
			version, firstMavenError(output, runErr), logPath)
	}
	if err := os.WriteFile(filepath.Join(out, completeMarker), []byte(want+"\n"), 0o644); err != nil {
		return "", fmt.Errorf("kafkatest: %w", err)
	}
	if complete(libs, want) { // another process won the race
		return libs, nil
	}
	_ = os.RemoveAll(libs) // incomplete or stale
	if err := os.Rename(out, libs); err != nil && !complete(libs, want) {
		return "", fmt.Errorf("kafkatest: publishing the jars: %w", err)
	}
	return libs, nil
}

func complete(libs, want string) bool {
	b, err := os.ReadFile(filepath.Join(libs, completeMarker))
	return err == nil && strings.TrimSpace(string(b)) == want
}

// firstMavenError picks the line that says why Maven failed.
func firstMavenError(output []byte, err error) string {
	for _, line := range strings.Split(ansi.ReplaceAllString(string(output), ""), "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "[ERROR]") {
			line = strings.TrimSpace(strings.TrimPrefix(line, "[ERROR]"))
			if line == "" {
				continue
			}
			if len(line) > 300 {
				line = line[:300] + "..."
			}
			return line
		}
	}
	return err.Error()
}

// ansi matches the colour escapes Debian's mvn prints even in batch mode.
var ansi = regexp.MustCompile("\x1b\\[[0-9;]*[A-Za-z]")

var javaVersion = regexp.MustCompile(`version "(\d+)`)

// checkJava says in one line when java is missing or older than 17 (the
// oldest Java Kafka 4's broker runs on; 3.9 runs on it too).
func checkJava(ctx context.Context, version string) error {
	java, err := exec.LookPath("java")
	if err != nil {
		return errors.New("kafkatest: java not found in PATH: install a JDK 17+ to run the Kafka " + version + " broker (or run the suite against RIFFLE_KAFKA_BROKERS)")
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, java, "-version").CombinedOutput()
	if err != nil {
		return fmt.Errorf("kafkatest: %s -version failed: %v", java, err)
	}
	m := javaVersion.FindSubmatch(out)
	if m == nil {
		return nil // an unusual banner: let the broker say what is wrong
	}
	if v, _ := strconv.Atoi(string(m[1])); v < 17 { // "1.8.0" is Java 8
		first, _, _ := bytes.Cut(out, []byte("\n"))
		return fmt.Errorf("kafkatest: Kafka %s needs Java 17+, %s is %s", version, java, strings.TrimSpace(string(first)))
	}
	return nil
}
