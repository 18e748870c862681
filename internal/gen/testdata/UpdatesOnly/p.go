// Package p declares an update and a stream for workflows of another
// package: it gets their names and client functions, and no workflow
// context methods or registration.
package p

import "errors"

// Question asks a run something.
//
//stem:update name=p.ask reply=Answer validate=checkQuestion
type Question struct {
	Text string `json:"text"`
}

// Answer is a run's reply to a Question.
type Answer struct {
	Text string `json:"text"`
}

func checkQuestion(q Question) error {
	if q.Text == "" {
		return errors.New("empty question")
	}
	return nil
}

// Tick is a value of the ticks stream.
//
//stem:stream name=p.ticks
type Tick int64
