// h3load: an HTTP/3 load client for bench/ (h2load from Debian speaks no HTTP/3), on quic-go.
// -c connections, each with -m streams asking for URL again and again, for -D seconds or until
// -n requests are done. It prints its figures in h2load's words (finished, requests, status
// codes, traffic), so bench/harness.py reads both the same way. The server's certificate is
// not checked: the bench makes its own.
package main

import (
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
)

type counts struct {
	ok, failed, errored        atomic.Int64
	s2xx, s3xx, s4xx, s5xx     atomic.Int64
	body, started, maxRequests atomic.Int64
}

// stream asks for url on rt until the deadline passes or the request budget is spent.
func stream(ctx context.Context, rt *http3.Transport, url string, c *counts, buf []byte) {
	for ctx.Err() == nil {
		if n := c.started.Add(1); c.maxRequests.Load() > 0 && n > c.maxRequests.Load() {
			return
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			c.errored.Add(1)
			return
		}
		resp, err := rt.RoundTrip(req)
		if err != nil {
			if ctx.Err() == nil {
				c.errored.Add(1)
				c.failed.Add(1)
			}
			continue
		}
		n, err := io.CopyBuffer(io.Discard, resp.Body, buf)
		resp.Body.Close()
		c.body.Add(n)
		if err != nil {
			if ctx.Err() == nil {
				c.errored.Add(1)
				c.failed.Add(1)
			}
			continue
		}
		switch resp.StatusCode / 100 {
		case 2:
			c.s2xx.Add(1)
		case 3:
			c.s3xx.Add(1)
		case 4:
			c.s4xx.Add(1)
		default:
			c.s5xx.Add(1)
		}
		if resp.StatusCode < 400 {
			c.ok.Add(1)
		} else {
			c.failed.Add(1)
		}
	}
}

// h2load's joined short options (-c4 -m100) read as Go's flag package wants them (-c=4).
func joinedOptions(args []string) []string {
	out := make([]string, 0, len(args))
	for _, a := range args {
		if len(a) > 2 && a[0] == '-' && strings.ContainsRune("cmnD", rune(a[1])) && a[2] != '=' {
			a = a[:2] + "=" + a[2:]
		}
		out = append(out, a)
	}
	return out
}

func main() {
	conns := flag.Int("c", 1, "connections")
	streams := flag.Int("m", 1, "concurrent streams per connection")
	secs := flag.Float64("D", 0, "seconds to run (0: until -n requests)")
	total := flag.Int64("n", 0, "requests in all (0: until -D seconds)")
	flag.CommandLine.Parse(joinedOptions(os.Args[1:]))
	if flag.NArg() != 1 || (*secs <= 0 && *total <= 0) || *conns < 1 || *streams < 1 {
		fmt.Fprintln(os.Stderr, "usage: h3load -c N -m N (-D SECONDS | -n REQUESTS) https://HOST:PORT/PATH")
		os.Exit(2)
	}
	url := flag.Arg(0)
	var c counts
	c.maxRequests.Store(*total)
	ctx := context.Background()
	if *secs > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(*secs*float64(time.Second)))
		defer cancel()
	}
	start := time.Now()
	var wg sync.WaitGroup
	for i := 0; i < *conns; i++ {
		// One transport per connection: a transport keeps one connection per host.
		rt := &http3.Transport{
			TLSClientConfig: &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h3"}},
			QUICConfig:      &quic.Config{MaxIncomingStreams: -1},
		}
		defer rt.Close()
		for j := 0; j < *streams; j++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				stream(ctx, rt, url, &c, make([]byte, 64<<10))
			}()
		}
	}
	wg.Wait()
	took := time.Since(start).Seconds()
	done := c.ok.Load() + c.failed.Load()
	fmt.Printf("finished in %.2fs, %.2f req/s, %.2fMB/s\n", took, float64(c.ok.Load())/took,
		float64(c.body.Load())/took/1e6)
	fmt.Printf("requests: %d total, %d started, %d done, %d succeeded, %d failed, %d errored, 0 timeout\n",
		done, done, done, c.ok.Load(), c.failed.Load(), c.errored.Load())
	fmt.Printf("status codes: %d 2xx, %d 3xx, %d 4xx, %d 5xx\n", c.s2xx.Load(), c.s3xx.Load(),
		c.s4xx.Load(), c.s5xx.Load())
	fmt.Printf("traffic: %.2fMB (%d) total, body bytes only\n", float64(c.body.Load())/1e6,
		c.body.Load())
	if c.ok.Load() == 0 {
		os.Exit(1)
	}
}
