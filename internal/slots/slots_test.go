package slots

import "testing"

// TestOf: the check value of CRC-16/XMODEM, and slots as Redis documents
// them, hash tags and their edge cases included.
func TestOf(t *testing.T) {
	if got := CRC16("123456789"); got != 0x31C3 {
		t.Fatalf("CRC16 check value = %#x, want 0x31c3", got)
	}
	for key, want := range map[string]int{
		"foo":       12182,
		"{user1}.a": Of("user1"),
		"{user1}.b": Of("user1"),
		"x{}y":      int(CRC16("x{}y") % Count),
		"{}{b}":     int(CRC16("{}{b}") % Count),
		"a{b}{c}":   Of("b"),
	} {
		if got := Of(key); got != want {
			t.Errorf("Of(%q) = %d, want %d", key, got, want)
		}
	}
}
