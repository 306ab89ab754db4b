package protocol

import (
	"errors"
	"fmt"
)

// Error is a protocol error: a snake_case code that programs branch on, an
// HTTP-like status carried in the Nats-Service-Error-Code header, and a
// message for people.
type Error struct {
	Code    string
	Status  int
	Message string
}

func (e *Error) Error() string {
	if e.Message == "" {
		return e.Code
	}
	return e.Code + ": " + e.Message
}

// Is makes errors.Is match any *Error with the same code, so callers can
// write errors.Is(err, protocol.ErrNotYourTurn) whatever the message.
func (e *Error) Is(target error) bool {
	var t *Error
	return errors.As(target, &t) && t.Code == e.Code
}

// Sentinels for the codes of docs/protocol.md. Wrap them with Errorf to add detail.
var (
	ErrInvalid           = &Error{Code: "invalid", Status: 400}
	ErrNotMember         = &Error{Code: "not_member", Status: 403}
	ErrForbidden         = &Error{Code: "forbidden", Status: 403}
	ErrNotFound          = &Error{Code: "not_found", Status: 404}
	ErrNotYourTurn       = &Error{Code: "not_your_turn", Status: 409}
	ErrIllegalTransition = &Error{Code: "illegal_transition", Status: 409}
	ErrConflict          = &Error{Code: "conflict", Status: 409}
	ErrDepthExceeded     = &Error{Code: "depth_exceeded", Status: 409}
	ErrTooLarge          = &Error{Code: "too_large", Status: 413}
	ErrRateLimited       = &Error{Code: "rate_limited", Status: 429}
	ErrQuotaExceeded     = &Error{Code: "quota_exceeded", Status: 429}
	ErrUnavailable       = &Error{Code: "unavailable", Status: 503}
	ErrTimeout           = &Error{Code: "timeout", Status: 504}
	ErrInternal          = &Error{Code: "internal", Status: 500}
)

// Errorf returns an error with the code and status of base and a formatted
// message.
func Errorf(base *Error, format string, args ...any) *Error {
	return &Error{Code: base.Code, Status: base.Status, Message: fmt.Sprintf(format, args...)}
}

// AsError turns any error into a protocol error; errors that are not one
// become ErrInternal with the error's text.
func AsError(err error) *Error {
	var pe *Error
	if errors.As(err, &pe) {
		return pe
	}
	return &Error{Code: ErrInternal.Code, Status: ErrInternal.Status, Message: err.Error()}
}

// ErrorBody is the JSON body of an error reply:
// {"error":{"code":"snake_case_reason","message":"..."}}.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail is the inside of ErrorBody.
type ErrorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}
