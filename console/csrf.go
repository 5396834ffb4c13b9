package console

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
)

// csrfCookie holds a random value of the browser's; the forms carry a MAC
// of it, which another site can neither read nor make.
const csrfCookie = "koto_console_csrf"

// csrfField is the name of the forms' CSRF field.
const csrfField = "csrf"

// csrfToken returns the CSRF token of the browser, setting its cookie
// first if it has none.
func (h *Handler) csrfToken(w http.ResponseWriter, r *http.Request) string {
	c, err := r.Cookie(csrfCookie)
	value := ""
	if err == nil && len(c.Value) >= 16 {
		value = c.Value
	} else {
		value = rand.Text()
		h.setCookie(w, r, csrfCookie, value)
		r.AddCookie(&http.Cookie{Name: csrfCookie, Value: value}) // for a later call in this request
	}
	return h.csrfMAC(value)
}

func (h *Handler) csrfMAC(cookie string) string {
	m := hmac.New(sha256.New, h.key)
	m.Write([]byte("csrf\x00" + cookie))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// errCSRF refuses a form without the token of the page it came from.
var errCSRF = &httpError{code: http.StatusForbidden, msg: "the form's CSRF token is missing or wrong; reload the page and try again"}

// checkCSRF lets through only a form that carries the browser's token.
func (h *Handler) checkCSRF(next func(http.ResponseWriter, *http.Request) error) func(http.ResponseWriter, *http.Request) error {
	return func(w http.ResponseWriter, r *http.Request) error {
		c, err := r.Cookie(csrfCookie)
		if err != nil || len(c.Value) < 16 {
			return errCSRF
		}
		if !hmac.Equal([]byte(r.PostFormValue(csrfField)), []byte(h.csrfMAC(c.Value))) {
			return errCSRF
		}
		return next(w, r)
	}
}
