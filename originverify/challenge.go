package originverify

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"strconv"
	"strings"

	"github.com/opencontainers/go-digest"
)

const (
	// smallBlobBytes is the largest blob fetched whole rather than
	// challenged by ranges.
	smallBlobBytes = 4 << 10
	// rangeBytes is the length of one challenged range.
	rangeBytes = 256
	// ranges is the number of ranges challenged per blob.
	ranges = 2
)

// challengeBlob proves the blob desc (role "config" or "layer N" of
// manifest m) when the node holds it: those are the blobs the runtime would
// not fetch. A blob the node does not hold is not asked for: the runtime
// fetches it and checks its digest itself.
func (s *session) challengeBlob(ctx context.Context, m digest.Digest, desc *descriptor, role string) *OriginError {
	what := role + " of manifest " + short(m)
	d, err := digest.Parse(desc.Digest)
	if err != nil {
		return s.notProven(http.StatusOK, what, "the manifest names an invalid digest")
	}
	what = role + " " + short(d) + " of manifest " + short(m)
	if desc.Size < 0 {
		return s.notProven(http.StatusOK, what, "the manifest names a negative size")
	}
	if s.seen[d.String()] {
		return nil
	}
	local, held, haveBytes := s.held(ctx, d)
	switch {
	case !held:
		return nil
	case haveBytes && local != desc.Size:
		return s.notProven(http.StatusOK, what, fmt.Sprintf("size %d in the manifest, the node holds %d bytes", desc.Size, local))
	}
	s.seen[d.String()] = true
	switch {
	case !haveBytes:
		if desc.Size > s.maxBlobBytes {
			return s.notProven(0, what, fmt.Sprintf("without the node's copy to compare the blob is fetched whole, and it is %d bytes, over the %d-byte cap", desc.Size, s.maxBlobBytes))
		}
		return s.fetchWhole(ctx, what, d, desc.Size, nil)
	case local <= smallBlobBytes:
		return s.fetchWhole(ctx, what, d, local, nil)
	default:
		return s.challengeRanges(ctx, what, d, local)
	}
}

// challengeRanges asks for ranges of blob d (size bytes, held by the node)
// at offsets drawn at random for this verification and compares them with
// the node's copy. A registry that ignores ranges (200) gets its whole
// answer hashed, up to the cap.
func (s *session) challengeRanges(ctx context.Context, what string, d digest.Digest, size int64) *OriginError {
	for range ranges {
		off, err := rand.Int(rand.Reader, big.NewInt(size-rangeBytes+1))
		if err != nil {
			return s.t.fail(ErrUnreachable, 0, what+": no random offset: "+err.Error())
		}
		start := off.Int64()
		end := start + rangeBytes - 1
		asked := fmt.Sprintf("bytes %d-%d", start, end)
		resp, oe := s.get(ctx, "/blobs/"+d.String(), http.Header{"Range": {fmt.Sprintf("bytes=%d-%d", start, end)}})
		if oe != nil {
			return oe
		}
		switch resp.StatusCode {
		case http.StatusPartialContent:
		case http.StatusOK:
			if size > s.maxBlobBytes {
				resp.Body.Close()
				return s.notProven(http.StatusOK, what, fmt.Sprintf("the registry ignores range requests and the blob is %d bytes, over the %d-byte cap", size, s.maxBlobBytes))
			}
			return s.fetchWhole(ctx, what, d, size, resp)
		default:
			return s.answerFailure(resp, what)
		}
		if cr := resp.Header.Get("Content-Range"); !rangeIs(cr, start, end, size) {
			resp.Body.Close()
			return s.notProven(http.StatusPartialContent, what, fmt.Sprintf("asked for %s, the registry answered Content-Range %q", asked, truncate(printable(cr), 60)))
		}
		got, over, oe := s.readAtMost(ctx, resp, rangeBytes, what+" "+asked)
		switch {
		case oe != nil:
			return oe
		case over:
			return s.notProven(http.StatusPartialContent, what, fmt.Sprintf("the answer to %s is longer than %d bytes", asked, rangeBytes))
		case len(got) < rangeBytes:
			return s.notProven(http.StatusPartialContent, what, fmt.Sprintf("the answer to %s holds only %d bytes", asked, len(got)))
		}
		mine := make([]byte, rangeBytes)
		if _, err := s.content.ReadAt(ctx, d.String(), mine, start); err != nil {
			// The node's copy cannot be read: fall back to the whole
			// blob, hashed.
			if size > s.maxBlobBytes {
				return s.notProven(0, what, fmt.Sprintf("the node's copy cannot be read, and the blob is %d bytes, over the %d-byte cap", size, s.maxBlobBytes))
			}
			return s.fetchWhole(ctx, what, d, size, nil)
		}
		if !bytes.Equal(got, mine) {
			return s.notProven(http.StatusPartialContent, what, asked+" differ from the node's copy")
		}
	}
	s.blobsChallenged++
	return nil
}

// rangeIs tells whether a Content-Range value names exactly bytes
// start-end, of total size when it gives a total.
func rangeIs(value string, start, end, size int64) bool {
	rest, ok := strings.CutPrefix(strings.TrimSpace(value), "bytes ")
	if !ok {
		return false
	}
	span, total, ok := strings.Cut(rest, "/")
	if !ok {
		return false
	}
	first, last, ok := strings.Cut(span, "-")
	if !ok {
		return false
	}
	a, errA := strconv.ParseInt(first, 10, 64)
	b, errB := strconv.ParseInt(last, 10, 64)
	if errA != nil || errB != nil || a != start || b != end {
		return false
	}
	if total == "*" {
		return true
	}
	n, err := strconv.ParseInt(total, 10, 64)
	return err == nil && n == size
}

// fetchWhole GETs blob d (size bytes; resp when a range request already
// got the whole blob) and checks its bytes hash to d.
func (s *session) fetchWhole(ctx context.Context, what string, d digest.Digest, size int64, resp *http.Response) *OriginError {
	if resp == nil {
		var oe *OriginError
		if resp, oe = s.get(ctx, "/blobs/"+d.String(), nil); oe != nil {
			return oe
		}
		if resp.StatusCode != http.StatusOK {
			return s.answerFailure(resp, what)
		}
	}
	defer resp.Body.Close()
	if resp.ContentLength >= 0 && resp.ContentLength != size {
		return s.notProven(resp.StatusCode, what, fmt.Sprintf("the registry answers %d bytes, the blob is %d", resp.ContentLength, size))
	}
	digester := d.Algorithm().Digester()
	n, err := io.Copy(digester.Hash(), io.LimitReader(resp.Body, size+1))
	switch {
	case err != nil:
		return s.readFailure(ctx, resp.StatusCode, what, err)
	case n < size:
		return s.notProven(resp.StatusCode, what, fmt.Sprintf("the body ended after %d of %d bytes (truncated)", n, size))
	case n > size:
		return s.notProven(resp.StatusCode, what, fmt.Sprintf("the body is longer than the blob's %d bytes", size))
	}
	if got := digester.Digest(); got != d {
		return s.notProven(resp.StatusCode, what, "the served bytes hash to "+short(got))
	}
	s.blobsFetched++
	return nil
}
