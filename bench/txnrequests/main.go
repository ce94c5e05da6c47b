// Command txnrequests counts the requests riffle and franz-go send to an
// in-process kfake broker for 100 transactions of 1000 records (no key,
// 12 partitions, linger 5ms, no compression), as the txn bench produces
// them: go run ./txnrequests
package main

import (
	"context"
	"fmt"
	"sort"
	"sync"

	"github.com/riffle-go/riffle"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const txns, per = 100, 1000

func count(name string, run func(addr string) error) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(12, "t"))
	if err != nil {
		panic(err)
	}
	defer c.Close()
	var mu sync.Mutex
	n := map[string]int{}
	c.Control(func(r kmsg.Request) (kmsg.Response, error, bool) {
		mu.Lock()
		n[fmt.Sprintf("%s v%d", kmsg.NameForKey(r.Key()), r.GetVersion())]++
		mu.Unlock()
		c.KeepControl()
		return nil, nil, false
	})
	if err := run(c.ListenAddrs()[0]); err != nil {
		panic(err)
	}
	mu.Lock()
	var ks []string
	for k := range n {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	fmt.Printf("%s, %d txns of %d:\n", name, txns, per)
	for _, k := range ks {
		fmt.Printf("  %-28s %d\n", k, n[k])
	}
	mu.Unlock()
}

func main() {
	ctx := context.Background()
	val := make([]byte, 100)
	count("riffle", func(addr string) error {
		cl, err := riffle.NewClient(riffle.SeedBrokers(addr))
		if err != nil {
			return err
		}
		defer cl.Close()
		p, err := riffle.NewProducer(cl, riffle.TransactionalID("r"), riffle.Linger(5e6), riffle.WithCompression(riffle.CompressionNone))
		if err != nil {
			return err
		}
		defer p.Close(ctx)
		if err := p.InitTransactions(ctx); err != nil {
			return err
		}
		for range txns {
			if err := p.BeginTransaction(); err != nil {
				return err
			}
			for range per {
				p.Produce(ctx, &riffle.Record{Topic: "t", Value: val}, nil)
			}
			if err := p.CommitTransaction(ctx); err != nil {
				return err
			}
		}
		return nil
	})
	count("franz-go", func(addr string) error {
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.TransactionalID("f"), kgo.ProducerLinger(5e6), kgo.ProducerBatchCompression(kgo.NoCompression()))
		if err != nil {
			return err
		}
		defer cl.Close()
		for range txns {
			if err := cl.BeginTransaction(); err != nil {
				return err
			}
			for range per {
				cl.Produce(ctx, &kgo.Record{Topic: "t", Value: val}, nil)
			}
			if err := cl.Flush(ctx); err != nil {
				return err
			}
			if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
				return err
			}
		}
		return nil
	})
}
