package getrecords

// The HTTP/2 connection's answers: the read loop, the frames it handles, and how a call's ended
// stream becomes its result (see h2.go).

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"golang.org/x/net/http2"
)

// answer makes the call's result of its ended stream st.
func (c *h2conn) answer(st *h2stream, gzipped bool, out *kinesis.GetRecordsOutput) (*http.Response, quick, error) {
	var q quick
	var encoding string
	for _, f := range st.fields {
		switch f.Name {
		case "content-encoding":
			encoding = f.Value
		case "date":
			if q.dateLen == 0 && len(f.Value) <= len(q.date) {
				q.dateLen = copy(q.date[:], f.Value)
			}
		case "age":
			q.age = true
		}
	}
	if st.status == http.StatusOK && encoding == "" && decodeEmpty(st.body.Bytes(), out) {
		q.ok = true
		c.w.quick.Add(1)
		return nil, q, nil
	}
	if st.status < 200 || (st.status >= 300 && st.status < 400) {
		return nil, quick{}, errForHTTPClient
	}
	h := make(http.Header, len(st.fields))
	for _, f := range st.fields {
		k := http.CanonicalHeaderKey(f.Name)
		h[k] = append(h[k], f.Value)
	}
	resp := &http.Response{Status: strconv.Itoa(st.status) + " " + http.StatusText(st.status), StatusCode: st.status,
		Proto: "HTTP/2.0", ProtoMajor: 2, Header: h, Body: http.NoBody, ContentLength: int64(st.body.Len())}
	if gzipped && strings.EqualFold(encoding, "gzip") {
		plain, err := gunzip(st.body.Bytes())
		if err != nil {
			return nil, quick{}, err
		}
		st.body.Reset()
		st.body.Write(plain)
		h.Del("Content-Encoding")
		h.Del("Content-Length")
		resp.ContentLength, resp.Uncompressed = -1, true
	}
	return resp, quick{}, nil
}

// gunzip decodes a gzipped body.
func gunzip(b []byte) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	return io.ReadAll(zr)
}

// readLoop reads the connection's frames until it fails or closes.
func (c *h2conn) readLoop() {
	defer close(c.done)
	for {
		f, err := c.fr.ReadFrame()
		if err != nil {
			c.fail(err)
			return
		}
		if err := c.handle(f); err != nil {
			c.fail(err)
			return
		}
	}
}

// handle acts on one frame the server sent.
func (c *h2conn) handle(f http2.Frame) error {
	switch f := f.(type) {
	case *http2.MetaHeadersFrame:
		c.headers(f)
	case *http2.DataFrame:
		c.data(f)
	case *http2.SettingsFrame:
		if f.IsAck() {
			return nil
		}
		if err := c.settings(f); err != nil {
			return err
		}
		c.control(c.fr.WriteSettingsAck)
	case *http2.WindowUpdateFrame:
		c.windowUpdate(f)
	case *http2.PingFrame:
		if !f.IsAck() {
			data := f.Data
			c.control(func() error { return c.fr.WritePing(true, data) })
		}
	case *http2.RSTStreamFrame:
		err := error(http2.StreamError{StreamID: f.StreamID, Code: f.ErrCode})
		if f.ErrCode == http2.ErrCodeRefusedStream {
			err = errH2Unprocessed
		}
		c.end(f.StreamID, err)
	case *http2.GoAwayFrame:
		c.goAway(f)
	case *http2.PushPromiseFrame:
		return http2.ConnectionError(http2.ErrCodeProtocol) // push is off (our SETTINGS)
	}
	return nil
}

// headers takes an answer's HEADERS: its status and fields (a 1xx is passed over, trailers are
// dropped), and the end of the stream.
func (c *h2conn) headers(f *http2.MetaHeadersFrame) {
	var ended []*h2stream
	c.mu.Lock()
	st := c.streams[f.StreamID]
	if st != nil && st.status == 0 {
		status, err := strconv.Atoi(f.PseudoValue("status"))
		switch {
		case err != nil || status < 100 || status > 999:
			st.err = fmt.Errorf("get records: malformed :status %q", f.PseudoValue("status"))
			if c.endLocked(f.StreamID, st) {
				ended = append(ended, st)
			}
		case status >= 200 || status == http.StatusSwitchingProtocols:
			st.status, st.fields = status, f.RegularFields()
		}
	}
	c.mu.Unlock()
	runEnded(ended)
	if f.StreamEnded() {
		c.end(f.StreamID, nil)
	}
}

// data takes a DATA frame: its bytes into the stream's body, the window given back in steps.
func (c *h2conn) data(f *http2.DataFrame) {
	n := int(f.Length) // padding included: it counts against the window
	var connCredit, streamCredit int
	c.mu.Lock()
	st := c.streams[f.StreamID]
	if st != nil && st.status != 0 {
		st.body.Write(f.Data())
		if st.unacked += n; st.unacked >= h2Credit && !f.StreamEnded() {
			streamCredit, st.unacked = st.unacked, 0
		}
	}
	if c.unacked += n; c.unacked >= h2Credit {
		connCredit, c.unacked = c.unacked, 0
	}
	c.mu.Unlock()
	if connCredit > 0 || streamCredit > 0 {
		id := f.StreamID
		c.control(func() error {
			var err error
			if connCredit > 0 {
				err = c.fr.WriteWindowUpdate(0, uint32(connCredit))
			}
			if err == nil && streamCredit > 0 {
				err = c.fr.WriteWindowUpdate(id, uint32(streamCredit))
			}
			return err
		})
	}
	if f.StreamEnded() {
		c.end(f.StreamID, nil)
	}
}

// end ends stream id: its answer is whole (err nil) or it failed.
func (c *h2conn) end(id uint32, err error) {
	c.mu.Lock()
	st := c.streams[id]
	run := false
	if st != nil {
		if st.err == nil {
			st.err = err
		}
		if st.err == nil && st.status == 0 {
			st.err = errors.New("get records: a stream ended without an answer")
		}
		run = c.endLocked(id, st)
	}
	c.mu.Unlock()
	if run {
		st.onEnd()
	}
}

// endLocked closes st's ended and forgets it; c.mu is held. It reports whether st has an onEnd,
// which the caller runs once c.mu is released (runEnded).
func (c *h2conn) endLocked(id uint32, st *h2stream) bool {
	delete(c.streams, id)
	close(st.ended)
	return st.onEnd != nil
}

// runEnded runs the onEnd of the streams endLocked ended.
func runEnded(ended []*h2stream) {
	for _, st := range ended {
		st.onEnd()
	}
}

// settings applies the server's SETTINGS.
func (c *h2conn) settings(f *http2.SettingsFrame) error {
	var tableSize uint32
	var hasTable bool
	c.mu.Lock()
	err := f.ForeachSetting(func(s http2.Setting) error {
		if err := s.Valid(); err != nil {
			return err
		}
		switch s.ID {
		case http2.SettingMaxConcurrentStreams:
			c.maxStreams = int(min(s.Val, 1<<20))
		case http2.SettingInitialWindowSize:
			delta := int64(s.Val) - c.initWindow
			c.initWindow = int64(s.Val)
			for _, st := range c.streams {
				st.window += delta
			}
		case http2.SettingMaxFrameSize:
			c.maxFrame = int(s.Val)
		case http2.SettingHeaderTableSize:
			tableSize, hasTable = s.Val, true
		}
		return nil
	})
	c.grewLocked()
	c.mu.Unlock()
	if err == nil && hasTable {
		c.wmu.Lock()
		c.enc.SetMaxDynamicTableSizeLimit(tableSize)
		c.wmu.Unlock()
	}
	return err
}

// windowUpdate grows a send window.
func (c *h2conn) windowUpdate(f *http2.WindowUpdateFrame) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if f.StreamID == 0 {
		c.sendWindow += int64(f.Increment)
	} else if st := c.streams[f.StreamID]; st != nil {
		st.window += int64(f.Increment)
	}
	c.grewLocked()
}

// grewLocked wakes the calls waiting for a send window; c.mu is held.
func (c *h2conn) grewLocked() {
	close(c.windowed)
	c.windowed = make(chan struct{})
}

// goAway takes the server's GOAWAY: no new streams; the streams above the last it processes are
// sent again elsewhere; the connection closes once the others have ended.
func (c *h2conn) goAway(f *http2.GoAwayFrame) {
	var ended []*h2stream
	c.mu.Lock()
	c.goaway = true
	for id, st := range c.streams {
		if id > f.LastStreamID {
			st.err = errH2Unprocessed
			if c.endLocked(id, st) {
				ended = append(ended, st)
			}
		}
	}
	if c.reserved == 0 {
		_ = c.conn.Close()
	}
	c.mu.Unlock()
	runEnded(ended)
}

// close closes the connection; its goroutines end.
func (c *h2conn) close() {
	c.fail(net.ErrClosed)
	<-c.done
}
