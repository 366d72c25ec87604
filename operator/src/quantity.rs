//! Kubernetes quantities (`10Gi`, `500M`, `50Mi`) as byte counts, for storage sizes and the
//! replication throttle. The API server checks the syntax (CEL `isQuantity`); this reads the
//! value, refusing what a byte count cannot be (fractions of a byte, negative numbers).

/// Why a quantity is not a byte count.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{text:?} is not a byte quantity such as 10Gi or 500M: {reason}")]
pub struct QuantityError {
    pub text: String,
    pub reason: &'static str,
}

/// The bytes `text` stands for.
pub fn bytes(text: &str) -> Result<u64, QuantityError> {
    let fail = |reason| QuantityError { text: text.to_string(), reason };
    let t = text.trim();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (number, suffix) = t.split_at(split);
    if number.is_empty() {
        return Err(fail("no number"));
    }
    let multiplier: u64 = match suffix {
        "" => 1,
        "k" => 1_000,
        "M" => 1_000_000,
        "G" => 1_000_000_000,
        "T" => 1_000_000_000_000,
        "P" => 1_000_000_000_000_000,
        "Ki" => 1 << 10,
        "Mi" => 1 << 20,
        "Gi" => 1 << 30,
        "Ti" => 1 << 40,
        "Pi" => 1 << 50,
        _ => return Err(fail("unknown suffix (use k, M, G, T, P, Ki, Mi, Gi, Ti or Pi)")),
    };
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    if fraction.contains('.') {
        return Err(fail("more than one decimal point"));
    }
    let whole: u64 = if whole.is_empty() { 0 } else { whole.parse().map_err(|_| fail("number too large"))? };
    let mut value = whole.checked_mul(multiplier).ok_or_else(|| fail("too large"))?;
    if !fraction.is_empty() {
        let digits = u32::try_from(fraction.len()).map_err(|_| fail("too many decimals"))?;
        let scale = 10u64.checked_pow(digits).ok_or_else(|| fail("too many decimals"))?;
        let f: u64 = fraction.parse().map_err(|_| fail("bad decimals"))?;
        let part = u128::from(f) * u128::from(multiplier);
        if part % u128::from(scale) != 0 {
            return Err(fail("not a whole number of bytes"));
        }
        let part = u64::try_from(part / u128::from(scale)).map_err(|_| fail("too large"))?;
        value = value.checked_add(part).ok_or_else(|| fail("too large"))?;
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binary_and_decimal_suffixes_are_read_as_kubernetes_reads_them() {
        assert_eq!(bytes("10Gi"), Ok(10 << 30));
        assert_eq!(bytes("500M"), Ok(500_000_000));
        assert_eq!(bytes("1.5Gi"), Ok(3 << 29));
        assert_eq!(bytes("1024"), Ok(1024));
        assert_eq!(bytes("50Mi"), Ok(50 << 20));
    }

    #[test]
    fn what_is_not_a_byte_count_is_refused_with_the_reason() {
        assert_eq!(bytes("ten").map_err(|e| e.reason), Err("no number"));
        assert_eq!(
            bytes("10GB").map_err(|e| e.reason),
            Err("unknown suffix (use k, M, G, T, P, Ki, Mi, Gi, Ti or Pi)")
        );
        assert_eq!(bytes("0.5").map_err(|e| e.reason), Err("not a whole number of bytes"));
        assert_eq!(bytes("1.2.3").map_err(|e| e.reason), Err("more than one decimal point"));
        assert!(bytes("99999999999Pi").is_err());
    }
}
