//go:build linux

package main

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// sample is the list of measurements of one variant, in the order taken.
type sample []time.Duration

func (s sample) sorted() sample {
	c := slices.Clone(s)
	slices.Sort(c)
	return c
}

// quantile is the nearest-rank quantile q (0 < q <= 1); zero for no data.
func (s sample) quantile(q float64) time.Duration {
	if len(s) == 0 {
		return 0
	}
	c := s.sorted()
	i := int(math.Ceil(q*float64(len(c)))) - 1
	return c[max(0, min(i, len(c)-1))]
}

// median is the middle value (the mean of the two middle ones for an even
// count).
func (s sample) median() time.Duration {
	if len(s) == 0 {
		return 0
	}
	c := s.sorted()
	if len(c)%2 == 1 {
		return c[len(c)/2]
	}
	return (c[len(c)/2-1] + c[len(c)/2]) / 2
}

func (s sample) min() time.Duration { return slices.Min(s) }
func (s sample) max() time.Duration { return slices.Max(s) }

// slope fits y = a + b*x by least squares and returns b.
func slope(xs, ys []float64) float64 {
	n := float64(len(xs))
	var sx, sy, sxx, sxy float64
	for i := range xs {
		sx += xs[i]
		sy += ys[i]
		sxx += xs[i] * xs[i]
		sxy += xs[i] * ys[i]
	}
	d := n*sxx - sx*sx
	if d == 0 {
		return 0
	}
	return (n*sxy - sx*sy) / d
}

// ms formats a duration in milliseconds with two decimals.
func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/1e6) }

// us formats a duration in microseconds.
func us(d time.Duration) string { return fmt.Sprintf("%.0f µs", float64(d)/1e3) }

// ratio formats a/b as "1.23x".
func ratio(a, b time.Duration) string {
	if b == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.2fx", float64(a)/float64(b))
}
