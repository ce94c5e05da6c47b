package kafkatest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/riffle-go/riffle"
)

// Config says what cluster Start runs. The zero value is one node.
type Config struct {
	// Version is the Kafka release to run, one of Versions (default
	// Version, 4.4.0; Version39 is 3.9.1).
	Version string
	// Nodes is 1 or 3 combined broker+controller nodes (default 1).
	// With 3, internal topics have replication factor 3 and
	// min.insync.replicas is 2 (topics too, by default).
	Nodes int
	// Dir is where the cluster's temporary directory goes: default
	// /dev/shm when it exists (the KRaft log fsyncs), else os.TempDir().
	Dir string
	// BrokerConfigs are added to every node's server.properties,
	// overriding the harness's settings of the same name.
	BrokerConfigs map[string]string
	// HeapMB is each node's -Xmx (default 512 for one node, 384 for
	// three); -Xms is half of it.
	HeapMB int
	// StartTimeout bounds Start, and Restart's wait (default 3 minutes:
	// a 2-core machine shared with other JVMs is slow).
	StartTimeout time.Duration
	// StopTimeout is how long Stop and Close wait after SIGTERM before
	// SIGKILL (default 20 s).
	StopTimeout time.Duration
	// Logf, when set, gets a line per step (formatting, starting,
	// ready, stopping).
	Logf func(format string, args ...any)
	// SASL adds a SASL_SSL listener on every node (PLAIN, SCRAM-SHA-256
	// and SCRAM-SHA-512 for SuperUser and User; a certificate for
	// 127.0.0.1 and localhost signed by a CA made at Start, see
	// Cluster.TLSConfig) and turns on StandardAuthorizer, with SuperUser
	// and ANONYMOUS (every PLAINTEXT client, and the nodes among
	// themselves) as super users.
	SASL bool
	// SASLReauth, with SASL, is the SASL_SSL listener's
	// connections.max.reauth.ms (KIP-368): the broker grants each
	// authentication a session this long and closes a connection that
	// sends a request other than a re-authentication after its session
	// ended. 0 keeps Kafka's default (sessions never end).
	SASLReauth time.Duration
	// KeepDir keeps the cluster's directory (configs, data, broker logs)
	// after Close, and says where it is through Logf.
	KeepDir bool
	// LogDirs is the number of log directories of each node, 1 to 4
	// (default 2: data-0, data-1 in the node's directory), all in
	// log.dirs (KRaft JBOD), so that a replica can be moved between a
	// broker's directories (AlterReplicaLogDirs). The first one also
	// holds the KRaft metadata log.
	LogDirs int
}

// Cluster is a running Apache Kafka cluster of combined KRaft nodes on
// loopback. Close it when done; a test binary that exits without closing
// it still takes its JVMs with it on Linux (PR_SET_PDEATHSIG).
type Cluster struct {
	cfg       Config
	rel       release
	dir       string
	libs      string
	clusterID string
	nodes     []*Node
	ca        *authority // with Config.SASL
	closeOnce sync.Once
	closeErr  error
}

// Node is one combined broker+controller JVM.
type Node struct {
	// ID is the node.id (1, 2, 3).
	ID int32
	// Rack is the broker.rack ("r1", "r2", "r3").
	Rack string
	// Addr is the PLAINTEXT listener, host:port on loopback.
	Addr string
	// ControllerAddr is the CONTROLLER listener.
	ControllerAddr string
	// SASLAddr is the SASL_SSL listener, "" without Config.SASL.
	SASLAddr string

	dir, conf, log string
	c              *Cluster

	mu   sync.Mutex
	proc *process // nil when not running
}

// process is one run of a node's JVM.
type process struct {
	cmd  *exec.Cmd
	done chan struct{} // closed once Wait returned
	err  error         // Wait's result, set before done closes
}

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Start resolves the jars (Libs), formats the nodes' storage and starts
// them, and returns once every node answers Metadata listing every node.
// On any failure nothing is left running and the error names the node and
// the end of its log.
func Start(ctx context.Context, cfg Config) (*Cluster, error) {
	if cfg.Nodes == 0 {
		cfg.Nodes = 1
	}
	if cfg.Nodes != 1 && cfg.Nodes != 3 {
		return nil, fmt.Errorf("kafkatest: Nodes %d: want 1 or 3", cfg.Nodes)
	}
	if cfg.LogDirs == 0 {
		cfg.LogDirs = 2
	}
	if cfg.LogDirs < 1 || cfg.LogDirs > 4 {
		return nil, fmt.Errorf("kafkatest: LogDirs %d: want 1 to 4", cfg.LogDirs)
	}
	if cfg.HeapMB == 0 {
		cfg.HeapMB = 512
		if cfg.Nodes > 1 {
			cfg.HeapMB = 384
		}
	}
	if cfg.StartTimeout == 0 {
		cfg.StartTimeout = 3 * time.Minute
	}
	if cfg.StopTimeout == 0 {
		cfg.StopTimeout = 20 * time.Second
	}
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	if cfg.Dir == "" {
		cfg.Dir = os.TempDir()
		if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
			cfg.Dir = "/dev/shm"
		}
	}
	rel, err := releaseOf(cfg.Version)
	if err != nil {
		return nil, err
	}
	cfg.Version = rel.version
	ctx, cancel := context.WithTimeout(ctx, cfg.StartTimeout)
	defer cancel()
	libs, err := LibsFor(ctx, rel.version)
	if err != nil {
		return nil, err
	}
	// A free port found now may be taken before the JVM binds it (another
	// test binary on the machine does the same): start again on fresh
	// ports when a node says so.
	for attempt := 1; ; attempt++ {
		c, err := start(ctx, cfg, rel, libs)
		if err == nil {
			return c, nil
		}
		if !errors.Is(err, errPortTaken) || attempt == 3 {
			return nil, err
		}
		cfg.Logf("kafkatest: %v; again on other ports", err)
	}
}

var errPortTaken = errors.New("a listener port was taken")

func start(ctx context.Context, cfg Config, rel release, libs string) (_ *Cluster, err error) {
	dir, err := os.MkdirTemp(cfg.Dir, "riffle-kafka-")
	if err != nil {
		return nil, fmt.Errorf("kafkatest: %w", err)
	}
	c := &Cluster{cfg: cfg, rel: rel, dir: dir, libs: libs, clusterID: newClusterID()}
	defer func() {
		if err != nil {
			c.Close()
		}
	}()
	log4j, _ := files.ReadFile(rel.logConfig())
	if err := os.WriteFile(c.log4j(), log4j, 0o644); err != nil {
		return nil, fmt.Errorf("kafkatest: %w", err)
	}
	perNode := 2
	if cfg.SASL {
		perNode = 3
		if c.ca, err = newAuthority(); err != nil {
			return nil, fmt.Errorf("kafkatest: making the TLS certificates: %w", err)
		}
		if err := os.WriteFile(c.keyStore(), c.ca.storePEM, 0o600); err != nil {
			return nil, fmt.Errorf("kafkatest: %w", err)
		}
	}
	ports, err := freePorts(perNode * cfg.Nodes)
	if err != nil {
		return nil, err
	}
	for i := range cfg.Nodes {
		id := int32(i + 1)
		nd := filepath.Join(dir, fmt.Sprintf("n%d", id))
		for _, d := range logDirs(nd, cfg.LogDirs) {
			if err := os.MkdirAll(d, 0o755); err != nil {
				return nil, fmt.Errorf("kafkatest: %w", err)
			}
		}
		n := &Node{
			ID:             id,
			Rack:           fmt.Sprintf("r%d", id),
			Addr:           net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[perNode*i])),
			ControllerAddr: net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[perNode*i+1])),
			dir:            nd,
			conf:           filepath.Join(nd, "server.properties"),
			log:            filepath.Join(nd, "broker.log"),
			c:              c,
		}
		if cfg.SASL {
			n.SASLAddr = net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[perNode*i+2]))
		}
		c.nodes = append(c.nodes, n)
	}
	for _, n := range c.nodes {
		if err := os.WriteFile(n.conf, []byte(c.serverProperties(n)), 0o644); err != nil {
			return nil, fmt.Errorf("kafkatest: %w", err)
		}
	}
	cfg.Logf("kafkatest: formatting %d node(s) in %s", cfg.Nodes, dir)
	errs := make(chan error, len(c.nodes))
	for _, n := range c.nodes {
		go func() { errs <- c.format(ctx, n) }()
	}
	for range c.nodes {
		if e := <-errs; e != nil && err == nil {
			err = e
		}
	}
	if err != nil {
		return nil, err
	}
	began := time.Now()
	for _, n := range c.nodes {
		if err := n.launch(); err != nil {
			return nil, err
		}
	}
	if err := c.waitReady(ctx, c.nodes); err != nil {
		return nil, err
	}
	cfg.Logf("kafkatest: Kafka %s ready in %v: %s", rel.version, time.Since(began).Round(100*time.Millisecond), strings.Join(c.Addrs(), ","))
	return c, nil
}

// Addrs are the PLAINTEXT bootstrap addresses of every node.
func (c *Cluster) Addrs() []string {
	out := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		out[i] = n.Addr
	}
	return out
}

// Version is the Kafka release the cluster runs.
func (c *Cluster) Version() string { return c.rel.version }

// Nodes are the cluster's nodes, by id.
func (c *Cluster) Nodes() []*Node { return slices.Clone(c.nodes) }

// Node returns the node with id, or nil.
func (c *Cluster) Node(id int32) *Node {
	for _, n := range c.nodes {
		if n.ID == id {
			return n
		}
	}
	return nil
}

// Dir is the cluster's directory: nN/server.properties, nN/broker.log
// and nN/data per node.
func (c *Cluster) Dir() string { return c.dir }

// ClusterID is the id the nodes were formatted with.
func (c *Cluster) ClusterID() string { return c.clusterID }

// Kill sends SIGKILL to node id's JVM and waits for it to exit.
func (c *Cluster) Kill(id int32) error {
	n := c.Node(id)
	if n == nil {
		return fmt.Errorf("kafkatest: no node %d", id)
	}
	return n.stop(syscall.SIGKILL, 0)
}

// Stop sends SIGTERM to node id's JVM (a controlled shutdown: its leaderships
// move first) and waits for it to exit, sending SIGKILL after StopTimeout.
func (c *Cluster) Stop(id int32) error {
	n := c.Node(id)
	if n == nil {
		return fmt.Errorf("kafkatest: no node %d", id)
	}
	return n.stop(syscall.SIGTERM, c.cfg.StopTimeout)
}

// Restart stops node id if it runs (SIGTERM), starts it again on the same
// storage and ports, and returns once every running node lists it in
// Metadata, or when ctx (bounded by StartTimeout) ends.
func (c *Cluster) Restart(ctx context.Context, id int32) error {
	n := c.Node(id)
	if n == nil {
		return fmt.Errorf("kafkatest: no node %d", id)
	}
	if err := n.stop(syscall.SIGTERM, c.cfg.StopTimeout); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.StartTimeout)
	defer cancel()
	var err error
	for attempt := 1; attempt <= 5; attempt++ {
		// After a SIGKILL, the node's ports can stay bound a moment.
		if err = n.launch(); err != nil {
			return err
		}
		err = c.waitReady(ctx, c.running())
		if err == nil || !errors.Is(err, errPortTaken) {
			break
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(time.Second):
		}
	}
	return err
}

// running are the nodes whose JVM runs.
func (c *Cluster) running() []*Node {
	var out []*Node
	for _, n := range c.nodes {
		if n.Running() {
			out = append(out, n)
		}
	}
	return out
}

// Close stops every node (SIGTERM together, SIGKILL after StopTimeout),
// waits for the JVMs to exit, and removes the cluster's directory unless
// KeepDir. It returns the first error; calling it again returns the same.
func (c *Cluster) Close() error {
	c.closeOnce.Do(func() {
		var wg sync.WaitGroup
		errs := make([]error, len(c.nodes))
		for i, n := range c.nodes {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = n.stop(syscall.SIGTERM, c.cfg.StopTimeout)
			}()
		}
		wg.Wait()
		c.closeErr = errors.Join(errs...)
		if c.cfg.KeepDir {
			c.cfg.Logf("kafkatest: kept %s", c.dir)
		} else {
			_ = os.RemoveAll(c.dir)
		}
	})
	return c.closeErr
}

// PIDs are the process ids of the running JVMs.
func (c *Cluster) PIDs() []int {
	var out []int
	for _, n := range c.nodes {
		if pid := n.PID(); pid > 0 {
			out = append(out, pid)
		}
	}
	return out
}

// Running says whether the node's JVM runs.
func (n *Node) Running() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.proc != nil && !n.proc.exited()
}

// PID is the JVM's process id, 0 when it does not run.
func (n *Node) PID() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.proc == nil || n.proc.exited() {
		return 0
	}
	return n.proc.cmd.Process.Pid
}

// LogPath is the file the JVM writes its stdout and stderr to.
func (n *Node) LogPath() string { return n.log }

// LogTail returns the last lines of the node's log.
func (n *Node) LogTail(lines int) string {
	b, err := os.ReadFile(n.log)
	if err != nil {
		return ""
	}
	all := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}

func (c *Cluster) log4j() string { return filepath.Join(c.dir, c.rel.logConfig()) }

// keyStore is the SASL_SSL listener's PEM key store (key and certificate).
func (c *Cluster) keyStore() string { return filepath.Join(c.dir, "keystore.pem") }

func (c *Cluster) classpath() string { return filepath.Join(c.libs, "*") }

// format runs StorageTool format on the node's storage, with the
// classpath the node runs with (a 4.4 broker refuses storage a newer tool
// formatted).
func (c *Cluster) format(ctx context.Context, n *Node) error {
	args := []string{"-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
		c.rel.logFlag(c.log4j()), "-cp", c.classpath(),
		"kafka.tools.StorageTool", "format", "-t", c.clusterID, "-c", n.conf, "--ignore-formatted"}
	if c.ca != nil {
		// SCRAM credentials go in the bootstrap metadata: there is no
		// user to create them with before the cluster runs.
		for _, mech := range []string{"SCRAM-SHA-256", "SCRAM-SHA-512"} {
			for _, u := range [][2]string{{SuperUser, SuperPassword}, {User, UserPassword}} {
				args = append(args, "--add-scram", fmt.Sprintf("%s=[name=%s,password=%s]", mech, u[0], u[1]))
			}
		}
	}
	cmd := exec.CommandContext(ctx, "java", args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := startProcess(cmd); err != nil {
		return fmt.Errorf("kafkatest: node %d: starting StorageTool: %w", n.ID, err)
	}
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("kafkatest: node %d: StorageTool format: %v: %s", n.ID, err, strings.TrimSpace(lastLines(out.String(), 5)))
	}
	return nil
}

// launch starts the node's JVM.
func (n *Node) launch() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.proc != nil && !n.proc.exited() {
		return nil
	}
	c := n.c
	logf, err := os.OpenFile(n.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("kafkatest: %w", err)
	}
	defer logf.Close() // the child has its own copy
	fmt.Fprintf(logf, "==== kafkatest: starting node %d at %s\n", n.ID, time.Now().Format(time.RFC3339Nano))
	heap := c.cfg.HeapMB
	cmd := exec.Command("java",
		fmt.Sprintf("-Xms%dm", heap/2), fmt.Sprintf("-Xmx%dm", heap),
		"-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", "-XX:InitiatingHeapOccupancyPercent=35",
		"-XX:+ExplicitGCInvokesConcurrent", "-XX:MaxInlineLevel=15", "-Djava.awt.headless=true",
		c.rel.logFlag(c.log4j()), "-Dkafka.logs.dir="+filepath.Join(n.dir, "logs"),
		// Names the cluster on the command line, so a leak check finds
		// the JVMs of this cluster and no other's.
		"-Driffle.kafkatest.dir="+c.dir,
		"-cp", c.classpath(), "kafka.Kafka", n.conf)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Dir = n.dir
	if err := startProcess(cmd); err != nil {
		return fmt.Errorf("kafkatest: node %d: starting java: %w", n.ID, err)
	}
	p := &process{cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	n.proc = p
	return nil
}

// stop signals the node's JVM and waits for it to exit; with a timeout, it
// sends SIGKILL once the timeout passes.
func (n *Node) stop(sig syscall.Signal, timeout time.Duration) error {
	n.mu.Lock()
	p := n.proc
	n.mu.Unlock()
	if p == nil || p.exited() {
		return nil
	}
	pid := p.cmd.Process.Pid
	_ = signalGroup(pid, sig)
	if sig != syscall.SIGKILL {
		select {
		case <-p.done:
			return nil
		case <-time.After(timeout):
			n.c.cfg.Logf("kafkatest: node %d did not stop %v after %v; SIGKILL", n.ID, sig, timeout)
		}
		_ = signalGroup(pid, syscall.SIGKILL)
	}
	select {
	case <-p.done:
		return nil
	case <-time.After(30 * time.Second):
		return fmt.Errorf("kafkatest: node %d (pid %d) still runs 30 s after SIGKILL", n.ID, pid)
	}
}

// waitReady returns once each of nodes answers Metadata, on its own
// listener, listing every one of nodes. It fails at once when one of them
// exits.
func (c *Cluster) waitReady(ctx context.Context, nodes []*Node) error {
	want := make([]int32, len(nodes))
	for i, n := range nodes {
		want[i] = n.ID
	}
	for _, n := range nodes {
		for {
			err := n.sees(ctx, want)
			if err == nil {
				break
			}
			n.mu.Lock()
			p := n.proc
			n.mu.Unlock()
			if p == nil || p.exited() {
				tail := n.LogTail(15)
				if strings.Contains(tail, "Address already in use") {
					return fmt.Errorf("kafkatest: node %d: %w:\n%s", n.ID, errPortTaken, tail)
				}
				return fmt.Errorf("kafkatest: node %d exited (%v) before it was ready; end of %s:\n%s", n.ID, p.err, n.log, tail)
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("kafkatest: node %d not ready (%v): %w; end of %s:\n%s", n.ID, err, ctx.Err(), n.log, n.LogTail(15))
			case <-p.done:
			case <-time.After(250 * time.Millisecond):
			}
		}
	}
	return nil
}

var discard = slog.New(slog.DiscardHandler)

// sees asks the node itself (a client that dials only its address) for
// Metadata and checks it lists every id of want.
func (n *Node) sees(ctx context.Context, want []int32) error {
	var d net.Dialer
	cl, err := riffle.NewClient(riffle.SeedBrokers(n.Addr), riffle.Logger(discard),
		riffle.DialTimeout(2*time.Second), riffle.RequestTimeout(5*time.Second),
		riffle.Dialer(func(ctx context.Context, network, addr string) (net.Conn, error) {
			if addr != n.Addr {
				return nil, fmt.Errorf("kafkatest: asking node %d only", n.ID)
			}
			return d.DialContext(ctx, network, addr)
		}))
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	bs, err := cl.Brokers(ctx)
	if err != nil {
		return err
	}
	for _, id := range want {
		if !slices.ContainsFunc(bs, func(b riffle.BrokerMetadata) bool { return b.NodeID == id }) {
			return fmt.Errorf("node %d does not list node %d yet", n.ID, id)
		}
	}
	return nil
}

// serverProperties is a node's configuration: PLAINTEXT and CONTROLLER
// listeners on loopback, a static quorum of every node, racks with the
// rack-aware replica selector (KIP-392), and settings that make tests fast.
func (c *Cluster) serverProperties(n *Node) string {
	rf, minISR := "1", "1"
	if len(c.nodes) >= 3 {
		rf, minISR = "3", "2"
	}
	voters := make([]string, len(c.nodes))
	for i, o := range c.nodes {
		voters[i] = fmt.Sprintf("%d@%s", o.ID, o.ControllerAddr)
	}
	props := map[string]string{
		"process.roles":                            "broker,controller",
		"node.id":                                  strconv.Itoa(int(n.ID)),
		"controller.quorum.voters":                 strings.Join(voters, ","),
		"listeners":                                "PLAINTEXT://" + n.Addr + ",CONTROLLER://" + n.ControllerAddr,
		"advertised.listeners":                     "PLAINTEXT://" + n.Addr,
		"controller.listener.names":                "CONTROLLER",
		"inter.broker.listener.name":               "PLAINTEXT",
		"listener.security.protocol.map":           "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
		"log.dirs":                                 strings.Join(logDirs(n.dir, c.cfg.LogDirs), ","),
		"broker.rack":                              n.Rack,
		"replica.selector.class":                   "org.apache.kafka.common.replica.RackAwareReplicaSelector",
		"auto.create.topics.enable":                "false",
		"num.partitions":                           "1",
		"default.replication.factor":               rf,
		"min.insync.replicas":                      minISR,
		"num.network.threads":                      "2",
		"num.io.threads":                           "4",
		"num.replica.fetchers":                     "1",
		"background.threads":                       "4",
		"log.cleaner.threads":                      "1",
		"log.cleaner.dedupe.buffer.size":           strconv.Itoa(8 << 20),
		"broker.heartbeat.interval.ms":             "1000",
		"broker.session.timeout.ms":                "6000",
		"replica.lag.time.max.ms":                  "10000",
		"unclean.leader.election.enable":           "false",
		"offsets.topic.replication.factor":         rf,
		"offsets.topic.num.partitions":             "4",
		"transaction.state.log.replication.factor": rf,
		"transaction.state.log.min.isr":            minISR,
		"transaction.state.log.num.partitions":     "4",
		// Groups: no initial rebalance delay, and heartbeat and session
		// bounds that let tests use short values.
		"group.initial.rebalance.delay.ms":                            "0",
		"group.min.session.timeout.ms":                                "1000",
		"group.consumer.heartbeat.interval.ms":                        "1000",
		"group.consumer.min.heartbeat.interval.ms":                    "500",
		"group.consumer.session.timeout.ms":                           "10000",
		"group.consumer.min.session.timeout.ms":                       "3000",
		"transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000",
	}
	if c.rel.major() >= 4 {
		// Share groups (KIP-932) are Kafka 4's: 3.9 has no such
		// settings (and no share groups).
		maps.Copy(props, map[string]string{
			"share.coordinator.state.topic.replication.factor": rf,
			"share.coordinator.state.topic.min.isr":            minISR,
			"share.coordinator.state.topic.num.partitions":     "4",
			"group.share.heartbeat.interval.ms":                "1000",
			"group.share.min.heartbeat.interval.ms":            "500",
			"group.share.session.timeout.ms":                   "10000",
			"group.share.min.session.timeout.ms":               "3000",
			"group.share.record.lock.duration.ms":              "15000",
			"group.share.min.record.lock.duration.ms":          "1000",
		})
	}
	if c.ca != nil {
		props["listeners"] += ",SASL_SSL://" + n.SASLAddr
		props["advertised.listeners"] += ",SASL_SSL://" + n.SASLAddr
		props["listener.security.protocol.map"] += ",SASL_SSL:SASL_SSL"
		l := "listener.name.sasl_ssl."
		props[l+"sasl.enabled.mechanisms"] = "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512"
		props[l+"plain.sasl.jaas.config"] = fmt.Sprintf(
			`org.apache.kafka.common.security.plain.PlainLoginModule required user_%s="%s" user_%s="%s";`,
			SuperUser, SuperPassword, User, UserPassword)
		props[l+"scram-sha-256.sasl.jaas.config"] = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
		props[l+"scram-sha-512.sasl.jaas.config"] = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
		props[l+"ssl.keystore.type"] = "PEM"
		props[l+"ssl.keystore.location"] = c.keyStore()
		if c.cfg.SASLReauth > 0 {
			props[l+"connections.max.reauth.ms"] = strconv.FormatInt(c.cfg.SASLReauth.Milliseconds(), 10)
		}
		props["authorizer.class.name"] = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
		props["super.users"] = "User:" + SuperUser + ";User:ANONYMOUS"
	}
	maps.Copy(props, c.cfg.BrokerConfigs)
	var b strings.Builder
	fmt.Fprintf(&b, "# written by riffle's internal/kafkatest for Kafka %s\n", c.rel.version)
	for _, k := range slices.Sorted(maps.Keys(props)) {
		fmt.Fprintf(&b, "%s=%s\n", k, props[k])
	}
	return b.String()
}

// logDirs are the k log directories of the node whose directory is
// dir: data-0, data-1, ...
func logDirs(dir string, k int) []string {
	out := make([]string, k)
	for i := range out {
		out[i] = filepath.Join(dir, fmt.Sprintf("data-%d", i))
	}
	return out
}

// freePorts returns n distinct free loopback ports, found by listening on
// port 0 (all at once, so they differ).
func freePorts(n int) ([]int, error) {
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	ports := make([]int, n)
	for i := range ports {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("kafkatest: finding a free port: %w", err)
		}
		lns = append(lns, ln)
		ports[i] = ln.Addr().(*net.TCPAddr).Port
	}
	return ports, nil
}

// newClusterID is a random 16-byte id in Kafka's base64url form.
func newClusterID() string {
	for {
		var b [16]byte
		_, _ = rand.Read(b[:])
		// StorageTool takes an id starting with "-" for an option
		// ("argument --cluster-id/-t: expected one argument"); Kafka's
		// Uuid.randomUuid draws again for it too.
		if id := base64.RawURLEncoding.EncodeToString(b[:]); id[0] != '-' {
			return id
		}
	}
}

func lastLines(s string, n int) string {
	all := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(all) > n {
		all = all[len(all)-n:]
	}
	return strings.Join(all, "\n")
}

// Leftovers are the pids of processes still running one of this cluster's
// JVMs, wherever they came from: none after Close, unless something is
// wrong. Linux only (it reads /proc); nil elsewhere.
func (c *Cluster) Leftovers() []int { return jvmsOf(c.dir) }
