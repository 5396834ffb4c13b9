package console

import (
	"testing"

	"github.com/koto-dev/watermill-koto/kototest"
)

func TestMain(m *testing.M) { kototest.VerifyTestMain(m) }
