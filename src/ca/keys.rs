//! The CA's signing key in every PEM form istiod reads: PKCS#8 (`PRIVATE KEY`), PKCS#1
//! (`RSA PRIVATE KEY`, what `openssl genrsa` and cert-manager write) and SEC1 (`EC PRIVATE KEY`,
//! what `openssl ecparam -genkey` writes). The signing backend (ring) takes PKCS#8 only, so the
//! other two are wrapped into PKCS#8 first: the key itself is unchanged.

use rcgen::KeyPair;
use rustls::pki_types::PrivateKeyDer;

/// AlgorithmIdentifier of rsaEncryption (1.2.840.113549.1.1.1) with NULL parameters.
const RSA_ALGORITHM: &[u8] = &[
    0x30, 0x0d, 0x06, 0x09, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x01, 0x05, 0x00,
];
/// AlgorithmIdentifier of id-ecPublicKey on prime256v1 (P-256).
const EC_P256_ALGORITHM: &[u8] = &[
    0x30, 0x13, 0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01, 0x06, 0x08, 0x2a, 0x86, 0x48,
    0xce, 0x3d, 0x03, 0x01, 0x07,
];
/// AlgorithmIdentifier of id-ecPublicKey on secp384r1 (P-384).
const EC_P384_ALGORITHM: &[u8] = &[
    0x30, 0x10, 0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01, 0x06, 0x05, 0x2b, 0x81, 0x04,
    0x00, 0x22,
];

/// The key pair of `pem_text` (its first private key block, whatever its form).
pub fn key_pair(pem_text: &str) -> Result<KeyPair, String> {
    let der = rustls_pemfile::private_key(&mut pem_text.as_bytes())
        .map_err(|e| format!("unreadable PEM: {e}"))?
        .ok_or("no private key (PRIVATE KEY, RSA PRIVATE KEY or EC PRIVATE KEY) in it")?;
    let candidates: Vec<Vec<u8>> = match &der {
        PrivateKeyDer::Pkcs8(k) => vec![k.secret_pkcs8_der().to_vec()],
        PrivateKeyDer::Pkcs1(k) => vec![pkcs8(RSA_ALGORITHM, k.secret_pkcs1_der())],
        // The curve is named inside the SEC1 key; the wrapper naming another is refused by the
        // parser, so trying both curves finds the right one.
        PrivateKeyDer::Sec1(k) => [EC_P256_ALGORITHM, EC_P384_ALGORITHM]
            .iter()
            .map(|alg| pkcs8(alg, k.secret_sec1_der()))
            .collect(),
        _ => return Err("unsupported private key form".into()),
    };
    candidates
        .iter()
        .find_map(|pkcs8| KeyPair::try_from(pkcs8.as_slice()).ok())
        .ok_or_else(|| {
            "not an RSA, ECDSA P-256 or ECDSA P-384 key (the kinds a CA signs with)".to_string()
        })
}

/// PrivateKeyInfo { version 0, algorithm, privateKey OCTET STRING }.
fn pkcs8(algorithm: &[u8], key: &[u8]) -> Vec<u8> {
    let mut body = vec![0x02, 0x01, 0x00];
    body.extend_from_slice(algorithm);
    body.push(0x04);
    push_len(&mut body, key.len());
    body.extend_from_slice(key);
    let mut out = vec![0x30];
    push_len(&mut out, body.len());
    out.extend(body);
    out
}

/// A DER length: short form under 128, else long form.
fn push_len(out: &mut Vec<u8>, len: usize) {
    if len < 0x80 {
        out.push(len as u8);
        return;
    }
    let bytes: Vec<u8> = len
        .to_be_bytes()
        .into_iter()
        .skip_while(|b| *b == 0)
        .collect();
    out.push(0x80 | bytes.len() as u8);
    out.extend(bytes);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    /// A key `openssl` writes in its own default form for `args`, or `None` without openssl.
    fn openssl_key(args: &[&str]) -> Option<String> {
        let out = Command::new("openssl").args(args).output().ok()?;
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).to_string())
    }

    fn tempfile_dir() -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("rudder-keys-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn every_form_istiod_reads_signs() {
        let forms = [
            (
                vec!["genrsa", "-traditional", "2048"],
                "BEGIN RSA PRIVATE KEY",
            ),
            (
                vec!["ecparam", "-name", "prime256v1", "-genkey", "-noout"],
                "BEGIN EC PRIVATE KEY",
            ),
            (
                vec!["ecparam", "-name", "secp384r1", "-genkey", "-noout"],
                "BEGIN EC PRIVATE KEY",
            ),
            (vec!["genrsa", "2048"], "BEGIN PRIVATE KEY"),
        ];
        for (args, header) in forms {
            let Some(pem) = openssl_key(&args) else {
                eprintln!("skipping: no openssl");
                return;
            };
            assert!(pem.contains(header), "{args:?}: {pem}");
            let key = key_pair(&pem).unwrap_or_else(|e| panic!("{args:?}: {e}"));
            // The same key: its public half is the one openssl derives.
            let dir = tempfile_dir();
            let path = dir.join("key.pem");
            std::fs::write(&path, &pem).unwrap();
            let public = Command::new("openssl")
                .args(["pkey", "-pubout", "-in"])
                .arg(&path)
                .output()
                .unwrap();
            assert_eq!(
                key.public_key_pem().trim(),
                String::from_utf8_lossy(&public.stdout).trim(),
                "{args:?}"
            );
        }
        let generated = KeyPair::generate().unwrap();
        assert_eq!(
            key_pair(&generated.serialize_pem())
                .unwrap()
                .public_key_pem(),
            generated.public_key_pem()
        );
    }

    #[test]
    fn what_is_not_a_key_says_so() {
        assert!(key_pair("").unwrap_err().contains("no private key"));
        let cert_only = "-----BEGIN CERTIFICATE-----\nMAA=\n-----END CERTIFICATE-----\n";
        assert!(key_pair(cert_only).is_err());
        // A DSA-shaped PKCS#1 body is refused, not accepted as RSA.
        let junk = "-----BEGIN RSA PRIVATE KEY-----\nMAMCAQA=\n-----END RSA PRIVATE KEY-----\n";
        assert!(key_pair(junk).is_err());
    }
}
