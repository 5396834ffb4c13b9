package kototest_test

import (
	"testing"

	"github.com/koto-dev/watermill-koto/internal/kafkatest"
)

func TestMain(m *testing.M) { kafkatest.VerifyTestMain(m) }
