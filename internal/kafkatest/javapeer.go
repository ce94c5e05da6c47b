package kafkatest

import (
	"bufio"
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

//go:embed javapeer/Peer.java
var peerSource []byte

// peerLog4j sends the Java client's own log to stderr (stdout is the
// peer's protocol), warnings only.
const peerLog4j = `status = warn
appender.err.type = Console
appender.err.name = ERR
appender.err.target = SYSTEM_ERR
appender.err.layout.type = PatternLayout
appender.err.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.err.ref = ERR
`

// JavaPeer is the Java client (kafka-clients of the pinned release) as a
// peer of Riffle: the program javapeer/Peer.java, compiled against the
// broker's jars. Its modes and line protocol are in that file's comment.
type JavaPeer struct {
	java      string
	classpath string
	log4j     string
}

// BuildJavaPeer compiles javapeer/Peer.java with javac against the jars of
// Libs, into a directory of the cache named by the source's hash, reused
// while the source is unchanged (only a build needs javac). A missing javac
// is one line.
func BuildJavaPeer(ctx context.Context) (*JavaPeer, error) {
	libs, err := Libs(ctx)
	if err != nil {
		return nil, err
	}
	java, err := exec.LookPath("java")
	if err != nil {
		return nil, errors.New("kafkatest: java not found in PATH: the Java peer needs a JDK 17+")
	}
	cache, err := CacheDir()
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(append(append([]byte{}, peerSource...), peerLog4j...))
	dir := filepath.Join(cache, "javapeer-"+hex.EncodeToString(sum[:8]))
	p := &JavaPeer{
		java:      java,
		classpath: filepath.Join(dir, "classes") + string(os.PathListSeparator) + filepath.Join(libs, "*"),
		log4j:     filepath.Join(dir, "log4j2.properties"),
	}
	if _, err := os.Stat(filepath.Join(dir, completeMarker)); err == nil {
		return p, nil
	}
	javac, err := exec.LookPath("javac")
	if err != nil {
		return nil, errors.New("kafkatest: javac not found in PATH: the Java peer is compiled at test time and needs a JDK 17+ (not only a JRE)")
	}
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return nil, fmt.Errorf("kafkatest: %w", err)
	}
	tmp, err := os.MkdirTemp(cache, "javapeer-build-")
	if err != nil {
		return nil, fmt.Errorf("kafkatest: %w", err)
	}
	defer os.RemoveAll(tmp)
	src := filepath.Join(tmp, "Peer.java")
	if err := os.WriteFile(src, peerSource, 0o644); err != nil {
		return nil, fmt.Errorf("kafkatest: %w", err)
	}
	if err := os.WriteFile(filepath.Join(tmp, "log4j2.properties"), []byte(peerLog4j), 0o644); err != nil {
		return nil, fmt.Errorf("kafkatest: %w", err)
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(cctx, javac, "-nowarn", "-encoding", "UTF-8",
		"-cp", filepath.Join(libs, "*"), "-d", filepath.Join(tmp, "classes"), src).CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("kafkatest: javac javapeer/Peer.java: %v: %s", err, lastLines(string(out), 5))
	}
	if err := os.WriteFile(filepath.Join(tmp, completeMarker), nil, 0o644); err != nil {
		return nil, fmt.Errorf("kafkatest: %w", err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		if _, serr := os.Stat(filepath.Join(dir, completeMarker)); serr != nil { // not another build that won
			return nil, fmt.Errorf("kafkatest: publishing the Java peer: %w", err)
		}
	}
	return p, nil
}

// PeerProcess is a running Java peer.
type PeerProcess struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string
	done  chan struct{} // closed when the process has exited
	kill  chan struct{} // closed by Kill: stdout is drained, not delivered
	once  sync.Once
	err   error // the process's exit, set before done closes

	mu     sync.Mutex
	stderr strings.Builder
}

// Start runs the peer with args (its mode first). Its stdout lines come
// from Lines; it dies with the test binary (on Linux) and is killed when
// ctx ends.
func (p *JavaPeer) Start(ctx context.Context, args ...string) (*PeerProcess, error) {
	all := append([]string{"-Xms64m", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
		"-Dlog4j2.configurationFile=" + p.log4j, "-cp", p.classpath, "riffle.javapeer.Peer"}, args...)
	cmd := exec.Command(p.java, all...)
	pp := &PeerProcess{cmd: cmd, lines: make(chan string, 1024), done: make(chan struct{}), kill: make(chan struct{})}
	var err error
	if pp.stdin, err = cmd.StdinPipe(); err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = &lockedWriter{mu: &pp.mu, b: &pp.stderr}
	if err := startProcess(cmd); err != nil {
		return nil, fmt.Errorf("kafkatest: starting the Java peer: %w", err)
	}
	go func() { // owned by the process: ends when its stdout closes
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 64<<20)
		for sc.Scan() {
			select {
			case pp.lines <- sc.Text():
			case <-pp.kill:
			}
		}
		pp.err = cmd.Wait()
		close(pp.lines)
		close(pp.done)
	}()
	go func() { // ends with the process or ctx
		select {
		case <-ctx.Done():
			pp.Kill()
		case <-pp.done:
		}
	}()
	return pp, nil
}

type lockedWriter struct {
	mu *sync.Mutex
	b  *strings.Builder
}

func (w *lockedWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(b)
}

// Lines are the peer's stdout lines; closed once it has exited.
func (pp *PeerProcess) Lines() <-chan string { return pp.lines }

// Send writes one line to the peer's stdin.
func (pp *PeerProcess) Send(line string) error {
	_, err := io.WriteString(pp.stdin, line+"\n")
	return err
}

// CloseInput closes the peer's stdin (for produce: close the producer and
// exit; for group: leave the group and exit).
func (pp *PeerProcess) CloseInput() error { return pp.stdin.Close() }

// Kill kills the peer's JVM (SIGKILL to its process group): a crash.
// Lines not yet read are dropped from then on.
func (pp *PeerProcess) Kill() {
	pp.once.Do(func() { close(pp.kill) })
	_ = signalGroup(pp.cmd.Process.Pid, syscall.SIGKILL)
}

// Wait waits for the peer to exit, up to ctx, and returns how it exited.
func (pp *PeerProcess) Wait(ctx context.Context) error {
	select {
	case <-pp.done:
		return pp.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Stderr is what the peer has written on stderr so far (the Java
// client's warnings, a stack trace).
func (pp *PeerProcess) Stderr() string {
	pp.mu.Lock()
	defer pp.mu.Unlock()
	return pp.stderr.String()
}
