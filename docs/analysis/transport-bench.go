//go:build ignore

// Transport-bench times what a cluster step's trips cost between two
// processes on this machine, apart from mgrpo (docs/BENCHMARKS.md, "What
// bounds the 3-process step on this machine"): round trips of 64 bytes over
// raw TCP and of a small message through proto.actor (back to back, and
// with 2 ms pauses, as between stages), PolicyWeights of 4 MB and 64 MB
// through proto.actor with the CPU each side spends, and one raw TCP write
// of 64 MB. It starts its own second process.
//
// Usage, from the repository root: go run docs/analysis/transport-bench.go
package main

import (
	"bufio"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"syscall"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
	"github.com/mgrpo/mgrpo/messages"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// cpuAsk is the version of a WeightsApplied that asks the server for its
// CPU time (answered in microseconds as the version).
const cpuAsk = -1

func main() {
	if len(os.Args) == 4 && os.Args[1] == "serve" {
		serve(os.Args[2], os.Args[3])
		return
	}
	client()
}

// system starts an actor system on 127.0.0.1:port with mgrpo's gRPC limits
// and at most 16 messages a gRPC batch (16 MiB of 1 MiB chunks).
func system(port int) *actor.ActorSystem {
	quiet := func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
	sys := actor.NewActorSystem(actor.WithLoggerFactory(quiet))
	r := remote.NewRemote(sys, remote.Configure("127.0.0.1", port,
		remote.WithServerOptions(grpc.MaxRecvMsgSize(64<<20)),
		remote.WithDialOptions(grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20))),
		remote.WithEndpointWriterBatchSize(16)))
	r.Start()
	return sys
}

// serve echoes: 64-byte TCP messages on tcpAddr's listener, a large TCP
// write with one byte, and on the actor port: WeightsApplied back, the
// last chunk of a PolicyWeights version with a WeightsApplied.
func serve(actorPort, tcpAddr string) {
	port, _ := strconv.Atoi(actorPort)
	sys := system(port)
	sys.Root.SpawnNamed(actor.PropsFromFunc(func(c actor.Context) {
		switch m := c.Message().(type) {
		case *messages.WeightsApplied:
			if m.GetVersion() == cpuAsk {
				m = &messages.WeightsApplied{Version: cpuMicros()}
			}
			c.Respond(m)
		case *messages.PolicyWeights:
			if m.GetChunkIndex() == m.GetChunkCount()-1 {
				c.Respond(&messages.WeightsApplied{Version: m.GetVersion()})
			}
		}
	}), "echo")
	l, err := net.Listen("tcp", tcpAddr)
	if err != nil {
		panic(err)
	}
	fmt.Println("ready")
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			r := bufio.NewReaderSize(c, 1<<20)
			kind, _ := r.ReadByte()
			n := 64
			if kind == 'B' {
				n = 64 << 20
			}
			b := make([]byte, n)
			for {
				if _, err := io.ReadFull(r, b); err != nil {
					return
				}
				c.Write(b[:min(n, 64)])
			}
		}()
	}
}

func client() {
	actorPort, tcpAddr := freePort(), "127.0.0.1:"+strconv.Itoa(freePort())
	srv := exec.Command(os.Args[0], "serve", strconv.Itoa(actorPort), tcpAddr)
	out, _ := srv.StdoutPipe()
	srv.Stderr = os.Stderr
	if err := srv.Start(); err != nil {
		panic(err)
	}
	defer srv.Process.Kill()
	if line, _ := bufio.NewReader(out).ReadString('\n'); line != "ready\n" {
		panic("server did not start: " + line)
	}
	fmt.Printf("# %d cores\n", runtime.NumCPU())
	tcpRTT(tcpAddr)
	sys := system(freePort())
	pid := actor.NewPID("127.0.0.1:"+strconv.Itoa(actorPort), "echo")
	actorRTT(sys, pid)
	weights(sys, pid, 4<<20, 1<<20, 50)
	weights(sys, pid, 64<<20, 1<<20, 6)
	weights(sys, pid, 64<<20, 256<<10, 6)
	bulk(tcpAddr)
}

// tcpRTT times 64-byte round trips over one TCP connection.
func tcpRTT(addr string) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		panic(err)
	}
	defer c.Close()
	c.Write([]byte{'R'})
	b := make([]byte, 64)
	for _, pause := range []time.Duration{0, 2 * time.Millisecond} {
		d := timed(1000, pause, func() {
			c.Write(b)
			io.ReadFull(c, b)
		})
		fmt.Printf("raw TCP round trip, 64 bytes, pause %v: %s\n", pause, quantiles(d))
	}
}

// actorRTT times RequestFuture round trips to the echo actor.
func actorRTT(sys *actor.ActorSystem, pid *actor.PID) {
	for _, pause := range []time.Duration{0, 2 * time.Millisecond} {
		d := timed(1000, pause, func() {
			if _, err := sys.Root.RequestFuture(pid, &messages.WeightsApplied{Version: 1}, time.Second).Result(); err != nil {
				panic(err)
			}
		})
		fmt.Printf("proto.actor round trip, pause %v: %s\n", pause, quantiles(d))
	}
}

// weights times reps transfers of total bytes of PolicyWeights in chunks of
// chunk bytes (all but the last sent, the last a request), 5 ms apart, and
// the CPU each side spends on them.
func weights(sys *actor.ActorSystem, pid *actor.PID, total, chunk, reps int) {
	n := total / chunk
	ch := make([]*messages.PolicyWeights, n)
	for k := range ch {
		ch[k] = &messages.PolicyWeights{ChunkIndex: int32(k), ChunkCount: int32(n), Tensors: []*messages.TensorChunk{{Name: "w", Data: make([]byte, chunk)}}}
	}
	server0, client0 := serverCPU(sys, pid), cpuMicros()
	d := timed(reps, 5*time.Millisecond, func() {
		for _, c := range ch[:n-1] {
			sys.Root.Send(pid, c)
		}
		if _, err := sys.Root.RequestFuture(pid, ch[n-1], 30*time.Second).Result(); err != nil {
			panic(err)
		}
	})
	server, own := serverCPU(sys, pid)-server0, cpuMicros()-client0
	fmt.Printf("PolicyWeights %d MB in %d KiB chunks: %s; CPU a transfer: sender %.1f ms, receiver %.1f ms\n",
		total>>20, chunk>>10, quantiles(d), float64(own)/1e3/float64(reps), float64(server)/1e3/float64(reps))
}

// bulk times one 64 MB write over raw TCP, answered with a byte.
func bulk(addr string) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		panic(err)
	}
	defer c.Close()
	c.Write([]byte{'B'})
	b := make([]byte, 64<<20)
	d := timed(6, 5*time.Millisecond, func() {
		c.Write(b)
		io.ReadFull(c, b[:64])
	})
	fmt.Printf("raw TCP write of 64 MB: %s\n", quantiles(d))
}

// timed runs f n times, pause apart, and returns the times (the first
// tenth, at least one, left out as warm-up).
func timed(n int, pause time.Duration, f func()) []time.Duration {
	var d []time.Duration
	for i := range n + max(n/10, 1) {
		t := time.Now()
		f()
		if i >= max(n/10, 1) {
			d = append(d, time.Since(t))
		}
		time.Sleep(pause)
	}
	return d
}

func quantiles(d []time.Duration) string {
	slices.Sort(d)
	q := func(f float64) time.Duration { return d[int(f*float64(len(d)-1))].Round(time.Microsecond) }
	return fmt.Sprintf("p10 %v, p50 %v, p90 %v (%d)", q(.1), q(.5), q(.9), len(d))
}

// serverCPU asks the echo actor's process for its CPU time (µs).
func serverCPU(sys *actor.ActorSystem, pid *actor.PID) int64 {
	r, err := sys.Root.RequestFuture(pid, &messages.WeightsApplied{Version: cpuAsk}, time.Second).Result()
	if err != nil {
		panic(err)
	}
	return r.(*messages.WeightsApplied).GetVersion()
}

// cpuMicros is this process's user and system CPU time in microseconds.
func cpuMicros() int64 {
	var u syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &u)
	return u.Utime.Nano()/1e3 + u.Stime.Nano()/1e3
}

func freePort() int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
