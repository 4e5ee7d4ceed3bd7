package admin

import (
	"net/http"
	"net/http/httptest"
	"strconv"
)

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func httptestRecorder(h http.Handler, path string) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	return rec
}
