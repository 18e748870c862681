package jsonschema

import "strings"

// decimal is an exact representation of a JSON number literal:
// the value is (neg ? -1 : 1) × 0.digits × 10^exp. digits has neither
// leading nor trailing zeros, and zero is digits == "" with neg false, so
// that -0, 0 and 0.0e5 compare equal. Comparing decimals never allocates
// big numbers, so a hostile literal such as 1e999999999 costs nothing.
type decimal struct {
	neg    bool
	digits string
	exp    int64
}

// maxExp bounds the exponents a decimal tracks. Literals whose exponent is
// beyond it saturate; no bound For emits is anywhere near it.
const maxExp = 1_000_000_000

// parseDecimal parses a JSON number literal. It reports false if lit is
// not a number in the JSON grammar.
func parseDecimal(lit string) (decimal, bool) {
	var d decimal
	s := lit
	if strings.HasPrefix(s, "-") {
		d.neg = true
		s = s[1:]
	}
	i := 0
	for i < len(s) && isDigit(s[i]) {
		i++
	}
	intPart := s[:i]
	if intPart == "" || (len(intPart) > 1 && intPart[0] == '0') {
		return decimal{}, false
	}
	s = s[i:]
	frac := ""
	if strings.HasPrefix(s, ".") {
		i = 1
		for i < len(s) && isDigit(s[i]) {
			i++
		}
		frac = s[1:i]
		if frac == "" {
			return decimal{}, false
		}
		s = s[i:]
	}
	var e int64
	if len(s) > 0 {
		if s[0] != 'e' && s[0] != 'E' {
			return decimal{}, false
		}
		s = s[1:]
		eneg := false
		if len(s) > 0 && (s[0] == '+' || s[0] == '-') {
			eneg = s[0] == '-'
			s = s[1:]
		}
		if s == "" {
			return decimal{}, false
		}
		for j := 0; j < len(s); j++ {
			if !isDigit(s[j]) {
				return decimal{}, false
			}
			if e < maxExp {
				e = e*10 + int64(s[j]-'0')
			}
		}
		if e > maxExp {
			e = maxExp
		}
		if eneg {
			e = -e
		}
	}
	digits := intPart + frac
	point := int64(len(intPart))
	lead := 0
	for lead < len(digits) && digits[lead] == '0' {
		lead++
	}
	digits = digits[lead:]
	point -= int64(lead)
	digits = strings.TrimRight(digits, "0")
	if digits == "" {
		return decimal{}, true
	}
	d.digits = digits
	d.exp = point + e
	return d, true
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// cmp returns -1, 0 or +1 as d is less than, equal to or greater than o.
func (d decimal) cmp(o decimal) int {
	ds, os := d.sign(), o.sign()
	if ds != os {
		if ds < os {
			return -1
		}
		return 1
	}
	if ds == 0 {
		return 0
	}
	c := cmpMagnitude(d, o)
	if ds < 0 {
		return -c
	}
	return c
}

func (d decimal) sign() int {
	switch {
	case d.digits == "":
		return 0
	case d.neg:
		return -1
	default:
		return 1
	}
}

// cmpMagnitude compares |d| and |o|, both non-zero.
func cmpMagnitude(d, o decimal) int {
	if d.exp != o.exp {
		if d.exp < o.exp {
			return -1
		}
		return 1
	}
	// Same magnitude: compare the digit strings. Neither has trailing
	// zeros, so when one is a prefix of the other the longer is larger.
	return strings.Compare(d.digits, o.digits)
}

// isIntegerLiteral reports whether a JSON number literal is one that
// encoding/json decodes into a Go integer type: no fraction, no exponent.
// "-0" is refused too: strconv.ParseUint rejects it, and json.Marshal
// never produces it for an integer.
func isIntegerLiteral(lit string) bool {
	return !strings.ContainsAny(lit, ".eE") && lit != "-0"
}
