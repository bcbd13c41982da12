#include "shortest.h"

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Writes sign, n significant digits (digits, no trailing zeros) and decimal exponent
 * exp10 (of the first digit) as the man page's: %.ng's layout, except that %g's exponent
 * form is written out in full while exp10 < 16. */
static size_t format_digits(bool neg, uint64_t digits, int n, int exp10, char *buf)
{
	char d[24];
	for (int i = n - 1; i >= 0; i--) {
		d[i] = (char)('0' + digits % 10);
		digits /= 10;
	}
	size_t k = 0;
	if (neg)
		buf[k++] = '-';
	if (exp10 < -4 || (exp10 >= 16 && exp10 >= n)) {
		buf[k++] = d[0];
		if (n > 1) {
			buf[k++] = '.';
			memcpy(buf + k, d + 1, (size_t)n - 1);
			k += (size_t)n - 1;
		}
		int e = exp10 < 0 ? -exp10 : exp10;
		k += (size_t)sprintf(buf + k, "e%c%02d", exp10 < 0 ? '-' : '+', e);
		return k;
	}
	if (exp10 < 0) {
		buf[k++] = '0';
		buf[k++] = '.';
		for (int i = -1; i > exp10; i--)
			buf[k++] = '0';
		memcpy(buf + k, d, (size_t)n);
		k += (size_t)n;
	} else if (exp10 + 1 >= n) {
		memcpy(buf + k, d, (size_t)n);
		k += (size_t)n;
		for (int i = n; i <= exp10; i++)
			buf[k++] = '0';
	} else {
		memcpy(buf + k, d, (size_t)exp10 + 1);
		k += (size_t)exp10 + 1;
		buf[k++] = '.';
		memcpy(buf + k, d + exp10 + 1, (size_t)(n - exp10 - 1));
		k += (size_t)(n - exp10 - 1);
	}
	buf[k] = 0;
	return k;
}

/* The reference search: the first N whose %.Ng text reads back, then ggufs(1)'s layout. */
static size_t shortest_search(double x, int max_prec, bool is_f32, char buf[SHORTEST_MAX])
{
	char t[SHORTEST_MAX + 16];
	int prec;
	for (prec = 1; prec < max_prec; prec++) {
		snprintf(t, sizeof t, "%.*e", prec - 1, x);
		bool back;
		if (is_f32) {
			float b = strtof(t, NULL), want = (float)x;
			back = memcmp(&b, &want, sizeof b) == 0;
		} else {
			double b = strtod(t, NULL);
			back = memcmp(&b, &x, sizeof b) == 0;
		}
		if (back)
			break;
	}
	snprintf(t, sizeof t, "%.*e", prec - 1, x);
	/* t is "-d.ddde+XX": gather the digits, drop trailing zeros */
	const char *p = t;
	bool neg = *p == '-';
	p += neg;
	uint64_t digits = 0;
	int n = 0;
	for (; *p != 'e'; p++) {
		if (*p == '.')
			continue;
		digits = digits * 10 + (uint64_t)(*p - '0');
		n++;
	}
	int exp10 = atoi(p + 1);
	while (n > 1 && digits % 10 == 0) {
		digits /= 10;
		n--;
	}
	return format_digits(neg, digits, n, exp10, buf);
}

static size_t special(double x, char buf[SHORTEST_MAX])
{
	if (isnan(x))
		return (size_t)sprintf(buf, "nan");
	if (isinf(x))
		return (size_t)sprintf(buf, x < 0 ? "-inf" : "inf");
	return (size_t)sprintf(buf, signbit(x) ? "-0" : "0");
}

size_t shortest_f32_reference(float f, char buf[SHORTEST_MAX])
{
	if (!isfinite(f) || f == 0)
		return special(f, buf);
	return shortest_search(f, 9, true, buf);
}

size_t shortest_f64(double d, char buf[SHORTEST_MAX])
{
	if (!isfinite(d) || d == 0)
		return special(d, buf);
	return shortest_search(d, 17, false, buf);
}

/* Powers of ten as doubles: exact up to 1e22, correctly rounded beyond. */
static const double pow10_table[] = {
	1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14,
	1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
};

/* A float has 24 significant bits and a double 53: x * 10^k, its rounding to N digits
 * and the test against the float's rounding interval can all be done in double, as long
 * as no decision falls within the few ulps of error that double arithmetic adds. Those
 * rare cases (and magnitudes whose scaling would need inexact powers) are reported as
 * undecided and go to the reference search. Values run from 1e-30 to 1e30 here. */
#define EPS 1e-14   /* far above double's error here, far below a float's ulp */

/* x * 10^k, with at most two roundings; k in -44..44. */
static double scale10(double x, int k)
{
	if (k < -22)
		return x / pow10_table[22] / pow10_table[-k - 22];
	if (k < 0)
		return x / pow10_table[-k];
	if (k <= 22)
		return x * pow10_table[k];
	return x * pow10_table[22] * pow10_table[k - 22];
}

/* Whether x rounded to n significant digits reads back as x, that is lies strictly
 * inside (lo, hi): 1 yes, 0 no, -1 too close to call. exp10 is x's decimal exponent.
 * On yes, *digits and *e are the n digits and their exponent (a carry may raise it). */
static int probe(double x, double lo, double hi, int exp10, int n, double *digits, int *e)
{
	int k = n - 1 - exp10;   /* scale so that n digits sit left of the point */
	if (k > 44 || k < -44)
		return -1;
	double scaled = scale10(x, k);
	double frac = scaled - floor(scaled);
	if (fabs(frac - 0.5) < 1e-6)
		return -1;       /* near a tie in the rounding to n digits */
	double r = floor(scaled + 0.5);
	*e = exp10;
	if (r >= pow10_table[n]) {
		r /= 10;         /* 9.99.. rounded up to 10.0: the exponent grows */
		*e += 1;
		k -= 1;
	}
	double d = scale10(r, -k);
	if (d > lo * (1 + EPS) && d < hi * (1 - EPS)) {
		*digits = r;
		return 1;
	}
	if (d < lo * (1 - EPS) || d > hi * (1 + EPS))
		return 0;
	return -1;               /* on an end of the interval, within error */
}

static bool shortest_f32_fast(float f, char buf[SHORTEST_MAX], size_t *len)
{
	float a = fabsf(f);
	if (!(a >= 1e-30f && a <= 1e30f))
		return false;
	double x = a;
	/* the decimals that read back as a lie strictly between the halfway points to its
	 * neighbours; one exactly on an end is a tie for strtof: left to the reference. a is
	 * a normal float here, so its neighbours are the next bit patterns down and up. */
	uint32_t bits;
	memcpy(&bits, &a, sizeof bits);
	const uint32_t nb[2] = { bits - 1, bits + 1 };
	float below, above;
	memcpy(&below, &nb[0], sizeof below);
	memcpy(&above, &nb[1], sizeof above);
	double lo = (x + (double)below) / 2;
	double hi = (x + (double)above) / 2;

	/* the decimal exponent from the binary one (no log10: this runs for every score of
	 * a vocabulary at mount): a = 1.f * 2^e2 puts it at floor(e2 log10 2) or one more,
	 * settled below, exactly */
	const int e2 = (int)(bits >> 23) - 127;
	int exp10 = (int)floor(e2 * 0.30102999566398120);
	double m = scale10(x, -exp10);
	if (m < 1 - EPS)
		exp10--;
	else if (m >= 10 * (1 + EPS))
		exp10++;
	else if (m < 1 + EPS || m >= 10 * (1 - EPS))
		return false;

	/* fewer digits never read back where more do not: a number of n digits is one of
	 * n + 1 digits too, so the n + 1 digit rounding is at least as close. Bisect. */
	int lo_n = 1, hi_n = 9, e = 0, found_e = 0;
	double digits = 0, found = -1;
	while (lo_n < hi_n) {
		int mid = (lo_n + hi_n) / 2;
		int p = probe(x, lo, hi, exp10, mid, &digits, &e);
		if (p < 0)
			return false;
		if (p) {
			hi_n = mid;
			found = digits;
			found_e = e;
		} else {
			lo_n = mid + 1;
		}
	}
	if (found < 0 || hi_n != lo_n) {
		if (probe(x, lo, hi, exp10, lo_n, &digits, &e) != 1)
			return false;
		found = digits;
		found_e = e;
	}
	uint64_t d = (uint64_t)found;
	int n = lo_n;
	while (n > 1 && d % 10 == 0) {
		d /= 10;
		n--;
	}
	*len = format_digits(f < 0, d, n, found_e, buf);
	return true;
}

size_t shortest_f32(float f, char buf[SHORTEST_MAX])
{
	size_t len;
	if (!isfinite(f) || f == 0)
		return special(f, buf);
	/* Below 2^24 every integer is a float, so no shorter decimal can name an integral
	 * f: its digits are its own (token scores are mostly such). */
	if (fabsf(f) < 16777216.0f && f == (float)(int32_t)f) {
		int32_t v = (int32_t)f;
		uint32_t u = (uint32_t)(v < 0 ? -v : v);
		uint64_t digits = u;
		int n = 1, exp10 = 0;
		while (u >= 10) {
			u /= 10;
			exp10++;
		}
		n = exp10 + 1;
		while (digits % 10 == 0) {
			digits /= 10;
			n--;
		}
		return format_digits(v < 0, digits, n, exp10, buf);
	}
	if (shortest_f32_fast(f, buf, &len))
		return len;
	return shortest_search(f, 9, true, buf);
}
