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

// Version is the Apache Kafka release pinned in pom.xml.
const Version = "4.4.0"

//go:embed pom.xml log4j2.properties
var files embed.FS

// dependencyPlugin is pinned so a fresh machine resolves the same jars.
const dependencyPlugin = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy-dependencies"

// completeMarker, in the libs directory, holds the hash of the pom that
// resolved it: a directory without it (an interrupted copy) or with another
// hash (the pin moved) is resolved again.
const completeMarker = ".riffle-complete"

// extraMavenArgs is for tests (offline mode, an empty local repository).
var extraMavenArgs []string

// CacheDir is where Libs keeps the jars: $RIFFLE_KAFKA_CACHE/kafka-VERSION,
// or riffle/kafka-VERSION in the user's cache directory
// (os.UserCacheDir), outside any repository and shared by every checkout.
func CacheDir() (string, error) {
	base := os.Getenv("RIFFLE_KAFKA_CACHE")
	if base == "" {
		d, err := os.UserCacheDir()
		if err != nil {
			return "", fmt.Errorf("kafkatest: no cache directory (set RIFFLE_KAFKA_CACHE): %w", err)
		}
		base = filepath.Join(d, "riffle")
	}
	return filepath.Join(base, "kafka-"+Version), nil
}

// Libs returns the directory holding the jars of the pinned Kafka broker,
// resolving them with Maven (mvn, from Maven Central or the mirror in the
// user's settings) the first time and reusing them afterwards. Concurrent
// callers, in one process or several, are safe: each resolves into a
// directory of its own and the first to finish publishes it with a rename.
//
// Every failure is one line: java or mvn missing, a Java older than 17,
// or a repository that could not be reached (the full Maven output is kept
// in a file the line names).
func Libs(ctx context.Context) (string, error) {
	if err := checkJava(ctx); err != nil {
		return "", err
	}
	dir, err := CacheDir()
	if err != nil {
		return "", err
	}
	pom, _ := files.ReadFile("pom.xml")
	sum := sha256.Sum256(pom)
	want := hex.EncodeToString(sum[:])
	libs := filepath.Join(dir, "libs")
	if complete(libs, want) {
		return libs, nil
	}
	mvn, err := exec.LookPath("mvn")
	if err != nil {
		return "", errors.New("kafkatest: mvn not found in PATH: install Apache Maven 3.8+ to fetch the Kafka " + Version + " jars (or run the suite against RIFFLE_KAFKA_BROKERS)")
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
		if _, err := os.Stat(filepath.Join(out, "kafka_2.13-"+Version+".jar")); err != nil {
			runErr = errors.New("kafka_2.13-" + Version + ".jar missing after the copy")
		}
	}
	if runErr != nil {
		logPath := filepath.Join(dir, "mvn.log")
		_ = os.WriteFile(logPath, output, 0o644)
		return "", fmt.Errorf("kafkatest: mvn could not resolve org.apache.kafka:kafka_2.13:%s (repository unreachable?): %s (full output: %s)",
			Version, firstMavenError(output, runErr), logPath)
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
// oldest Java Kafka 4's broker runs on).
func checkJava(ctx context.Context) error {
	java, err := exec.LookPath("java")
	if err != nil {
		return errors.New("kafkatest: java not found in PATH: install a JDK 17+ to run the Kafka " + Version + " broker (or run the suite against RIFFLE_KAFKA_BROKERS)")
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
		return fmt.Errorf("kafkatest: Kafka %s needs Java 17+, %s is %s", Version, java, strings.TrimSpace(string(first)))
	}
	return nil
}
