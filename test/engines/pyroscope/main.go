// A Pyroscope push receiver for dwunw's export tests, made of Pyroscope's own request types (its
// api module: the push.v1 PusherService Connect handler, the pprof Profile message). The server
// (github.com/grafana/pyroscope) does not build from its module: see ../README.md. Each request
// is written to -out as one JSON line: its headers, and each series' labels with its samples'
// IDs and profiles decoded (gzip'd or not) into protojson.
package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"sync"

	"connectrpc.com/connect"
	googlev1 "github.com/grafana/pyroscope/api/gen/proto/go/google/v1"
	pushv1 "github.com/grafana/pyroscope/api/gen/proto/go/push/v1"
	"github.com/grafana/pyroscope/api/gen/proto/go/push/v1/pushv1connect"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

type series struct {
	Labels   map[string]string `json:"labels"`
	IDs      []string          `json:"ids"`
	Profiles []json.RawMessage `json:"profiles"`
}

type record struct {
	Headers map[string][]string `json:"headers"`
	Series  []series            `json:"series"`
}

type pusher struct {
	mu  sync.Mutex
	out *os.File
}

func decodeProfile(raw []byte) (*googlev1.Profile, error) {
	if len(raw) > 2 && raw[0] == 0x1f && raw[1] == 0x8b {
		r, err := gzip.NewReader(bytes.NewReader(raw))
		if err != nil {
			return nil, err
		}
		if raw, err = io.ReadAll(r); err != nil {
			return nil, err
		}
	}
	p := &googlev1.Profile{}
	return p, proto.Unmarshal(raw, p)
}

func (p *pusher) Push(_ context.Context, req *connect.Request[pushv1.PushRequest]) (*connect.Response[pushv1.PushResponse], error) {
	rec := record{Headers: req.Header()}
	for _, s := range req.Msg.Series {
		out := series{Labels: map[string]string{}}
		for _, l := range s.Labels {
			out.Labels[l.Name] = l.Value
		}
		for _, smp := range s.Samples {
			prof, err := decodeProfile(smp.RawProfile)
			if err != nil {
				return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("raw_profile: %w", err))
			}
			j, err := protojson.Marshal(prof)
			if err != nil {
				return nil, connect.NewError(connect.CodeInternal, err)
			}
			out.IDs = append(out.IDs, smp.ID)
			out.Profiles = append(out.Profiles, j)
		}
		rec.Series = append(rec.Series, out)
	}
	line, err := json.Marshal(rec)
	if err != nil {
		return nil, connect.NewError(connect.CodeInternal, err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, err := p.out.Write(append(line, '\n')); err != nil {
		return nil, connect.NewError(connect.CodeInternal, err)
	}
	return connect.NewResponse(&pushv1.PushResponse{}), nil
}

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "listen address")
	outPath := flag.String("out", "", "file of the requests received (JSON lines)")
	flag.Parse()
	out, err := os.Create(*outPath)
	if err != nil {
		log.Fatal(err)
	}
	mux := http.NewServeMux()
	path, h := pushv1connect.NewPusherServiceHandler(&pusher{out: out})
	mux.Handle(path, h)
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("listening on %s\n", ln.Addr())
	log.Fatal(http.Serve(ln, mux))
}
