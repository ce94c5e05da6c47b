package kafkatest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// javaOnlyPath is a PATH directory holding java and nothing else.
func javaOnlyPath(t *testing.T) string {
	t.Helper()
	java, err := exec.LookPath("java")
	if err != nil {
		t.Skip("no java in PATH")
	}
	bin := t.TempDir()
	if err := os.Symlink(java, filepath.Join(bin, "java")); err != nil {
		t.Fatal(err)
	}
	return bin
}

// cachedLibs is the cached jars' directory, skipping the test when they
// have not been resolved (this test does not run Maven).
func cachedLibs(t *testing.T) string {
	t.Helper()
	dir, err := CacheDir()
	if err != nil {
		t.Skip(err)
	}
	libs := filepath.Join(dir, "libs")
	if _, err := os.Stat(filepath.Join(libs, completeMarker)); err != nil {
		t.Skip("the Kafka jars are not cached (go run ./internal/kafkatest/cmd/kafka -libs)")
	}
	return libs
}

// Without javac the Java peer cannot be built: one line saying so. Once
// built, it is reused from the cache without javac.
func TestJavaPeerNeedsJavacOnlyToBuild(t *testing.T) {
	libs := cachedLibs(t)
	if _, err := exec.LookPath("javac"); err != nil {
		t.Skip("no javac in PATH")
	}
	cache := t.TempDir()
	if err := os.MkdirAll(filepath.Join(cache, "kafka-"+Version), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(libs, filepath.Join(cache, "kafka-"+Version, "libs")); err != nil {
		t.Fatal(err)
	}
	t.Setenv("RIFFLE_KAFKA_CACHE", cache)
	full := os.Getenv("PATH")
	t.Setenv("PATH", javaOnlyPath(t))
	_, err := BuildJavaPeer(context.Background())
	if err == nil || !strings.Contains(err.Error(), "javac not found") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("no javac: want one line naming javac, got %v", err)
	}

	t.Setenv("PATH", full)
	built, err := BuildJavaPeer(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", javaOnlyPath(t))
	again, err := BuildJavaPeer(context.Background())
	if err != nil {
		t.Fatalf("a built peer needed javac again: %v", err)
	}
	if again.classpath != built.classpath {
		t.Fatalf("classpath %s, then %s", built.classpath, again.classpath)
	}
	if _, err := os.Stat(filepath.Join(strings.Split(built.classpath, string(os.PathListSeparator))[0], "riffle", "javapeer", "Peer.class")); err != nil {
		t.Fatalf("no compiled peer: %v", err)
	}
}
