package orders

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"

	"github.com/stemflow/stem/runtime"
)

// IdempotencyHeader carries a charge's idempotency key.
const IdempotencyHeader = "Idempotency-Key"

// PaymentsClient charges customers through a payment service's HTTP API:
// POST /charges with an Idempotency-Key header.
type PaymentsClient struct {
	baseURL string
	http    *http.Client
}

// NewPaymentsClient returns a client of the payment service at baseURL,
// using hc (http.DefaultClient when nil).
func NewPaymentsClient(baseURL string, hc *http.Client) *PaymentsClient {
	if hc == nil {
		hc = http.DefaultClient
	}
	return &PaymentsClient{baseURL: baseURL, http: hc}
}

type chargeRequest struct {
	Customer    string `json:"customer"`
	AmountCents int64  `json:"amount_cents"`
}

// Charge charges amount cents to customer. Charges with the same
// idempotency key are one charge: the service returns the first one's
// payment. A rejected charge (4xx) is a permanent *ChargeRejected, not
// worth retrying; anything else may be retried.
func (c *PaymentsClient) Charge(ctx context.Context, customer string, amountCents int64, idempotencyKey string) (Payment, error) {
	body, err := json.Marshal(chargeRequest{Customer: customer, AmountCents: amountCents})
	if err != nil {
		return Payment{}, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.baseURL+"/charges", bytes.NewReader(body))
	if err != nil {
		return Payment{}, runtime.Permanent(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(IdempotencyHeader, idempotencyKey)
	resp, err := c.http.Do(req)
	if err != nil {
		return Payment{}, fmt.Errorf("orders: charge: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return Payment{}, fmt.Errorf("orders: charge: %w", err)
	}
	switch {
	case resp.StatusCode == http.StatusOK:
		var p Payment
		if err := json.Unmarshal(b, &p); err != nil {
			return Payment{}, fmt.Errorf("orders: charge: %w", err)
		}
		return p, nil
	case resp.StatusCode >= 400 && resp.StatusCode < 500:
		return Payment{}, runtime.Permanent(&ChargeRejected{Status: resp.StatusCode, Reason: string(bytes.TrimSpace(b))})
	}
	return Payment{}, fmt.Errorf("orders: charge: %s: %s", resp.Status, bytes.TrimSpace(b))
}

// PaymentService is a fake payment provider (an http.Handler) that honours
// idempotency keys: the first request with a key charges, every later one
// with the same key returns that charge. It can be made flaky: the first
// FailFirst requests fail with 503 before charging, and the next
// LoseReplies requests charge but answer 502, as a provider whose reply is
// lost on the way back would.
type PaymentService struct {
	mu          sync.Mutex
	failFirst   int
	loseReplies int
	requests    int
	byKey       map[string]Payment
	order       []Payment
}

// NewPaymentService returns a payment service that fails its first
// failFirst requests and loses the replies of the loseReplies after them.
func NewPaymentService(failFirst, loseReplies int) *PaymentService {
	return &PaymentService{failFirst: failFirst, loseReplies: loseReplies, byKey: map[string]Payment{}}
}

// ServeHTTP serves POST /charges.
func (s *PaymentService) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/charges" {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	key := r.Header.Get(IdempotencyHeader)
	if key == "" {
		http.Error(w, "missing "+IdempotencyHeader, http.StatusBadRequest)
		return
	}
	var req chargeRequest
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&req); err != nil || req.AmountCents <= 0 {
		http.Error(w, "bad charge", http.StatusBadRequest)
		return
	}
	p, status := s.charge(key, req)
	if status != http.StatusOK {
		http.Error(w, http.StatusText(status), status)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(p)
}

func (s *PaymentService) charge(key string, req chargeRequest) (Payment, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests++
	if s.requests <= s.failFirst {
		return Payment{}, http.StatusServiceUnavailable
	}
	p, ok := s.byKey[key]
	if !ok {
		p = Payment{ID: fmt.Sprintf("pay-%d", len(s.order)+1), Customer: req.Customer, AmountCents: req.AmountCents}
		s.byKey[key] = p
		s.order = append(s.order, p)
	}
	if s.requests <= s.failFirst+s.loseReplies {
		return Payment{}, http.StatusBadGateway
	}
	return p, http.StatusOK
}

// Payments returns every charge made, in order.
func (s *PaymentService) Payments() []Payment {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Payment(nil), s.order...)
}

// Lookup returns the charge made with an idempotency key, for
// reconciliation (see StepCharge and FulfilRun.IdempotencyKey).
func (s *PaymentService) Lookup(key string) (Payment, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.byKey[key]
	return p, ok
}

// Requests returns how many charge requests the service received.
func (s *PaymentService) Requests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests
}
