package originverify

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/pullrecords/pullrecords/imageruntime"
)

// One Verifier serves every pod: what one credential proved (a token, a
// Basic header) must never help another call, in turn or concurrently.
func TestNothingCarriesOverBetweenCalls(t *testing.T) {
	for _, mode := range []authMode{basicAuth, bearerAuth} {
		t.Run(fmt.Sprint("mode ", mode), func(t *testing.T) {
			w := newWorld(t, mode)
			image := w.image(repoA, ":v1")
			ctx := context.Background()
			calls := []struct {
				auth  *imageruntime.AuthConfig
				allow bool
			}{
				{password(alice, alicePass), true},
				{nil, false},
				{password(alice, "wrong"), false},
				{&imageruntime.AuthConfig{}, false},
				{password(alice, alicePass), true},
				{&imageruntime.AuthConfig{Username: alice, Password: alicePass, ServerAddress: "elsewhere.example"}, false},
			}
			for i, c := range calls {
				_, err := w.verifier.Verify(ctx, image, c.auth)
				if (err == nil) != c.allow {
					t.Errorf("call %d (%v): err = %v, want allowed=%v", i, c.auth, err, c.allow)
				}
			}

			var wg sync.WaitGroup
			errs := make(chan error, 64)
			for i := range 64 {
				c := calls[i%len(calls)]
				wg.Go(func() {
					_, err := w.verifier.Verify(ctx, image, c.auth)
					switch {
					case c.allow && err != nil:
						errs <- fmt.Errorf("concurrent call %d refused: %v", i, err)
					case !c.allow && !errors.Is(err, ErrDenied):
						errs <- fmt.Errorf("concurrent call %d (%v) got %v, want ErrDenied", i, c.auth, err)
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
		})
	}
}
