//! What one caller of the webhook port can cost the daemon. The port is reachable from every pod
//! (through the Service), so memory and connections are bounded for all callers together: bytes of
//! request bodies held at once, reviews decoded at once (a decoded review takes several times its
//! size), JSON values per review (the amplification itself), and how long a request or an idle
//! connection may take.

use super::metrics::WebhookMetrics;
use crate::metrics::ReasonLabels;
use axum::body::{Body, Bytes};
use axum::http::StatusCode;
use http_body_util::BodyExt;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Largest AdmissionReview accepted. The API server caps a request at 3 MiB; a review carries the
/// object twice (object and oldObject) plus envelope.
pub const MAX_BODY_BYTES: usize = 8 * 1024 * 1024;

/// Body bytes are counted in units of this size (a semaphore permit each).
const UNIT: usize = 1024;

/// Reviews at least this big wait in their own lane: the API server's real traffic (pods, Istio
/// objects) is far smaller, and must never queue behind a caller sending megabytes.
const LARGE_REVIEW: usize = 1024 * 1024;

#[derive(Debug, Clone)]
pub struct WebhookLimits {
    /// Request body bytes held at once, all requests together; past it a request is refused (503).
    pub max_inflight_bytes: usize,
    /// Reviews decoded and judged at once, in each of two lanes (under and over 1 MiB); others
    /// wait up to `review_wait`, then 503.
    pub max_concurrent_reviews: usize,
    /// JSON values (objects, arrays, scalars) in one review; more is refused (413) before decoding.
    pub max_json_values: usize,
    /// Longest a request body may take to arrive (slowloris), then 408.
    pub body_timeout: Duration,
    /// Longest a request waits for a review slot.
    pub review_wait: Duration,
    /// Longest an HTTP/1 connection may take to send a request's headers, or sit idle between
    /// requests; an HTTP/2 connection without a request in flight is closed after it too.
    pub idle_timeout: Duration,
}

impl Default for WebhookLimits {
    fn default() -> Self {
        WebhookLimits {
            max_inflight_bytes: 64 * 1024 * 1024,
            max_concurrent_reviews: 4,
            max_json_values: 500_000,
            body_timeout: Duration::from_secs(10),
            review_wait: Duration::from_secs(5),
            idle_timeout: Duration::from_secs(30),
        }
    }
}

/// The shared budgets behind `WebhookLimits`.
pub struct Budget {
    pub limits: WebhookLimits,
    bytes: Arc<Semaphore>,
    reviews: Arc<Semaphore>,
    large_reviews: Arc<Semaphore>,
}

/// A request that was refused by a limit: the status, what the caller reads, and the metric reason.
#[derive(Debug)]
pub struct Refusal {
    pub status: StatusCode,
    pub reason: &'static str,
    pub message: String,
}

/// What a request holds while it is judged; dropping it gives the budget back.
pub struct Held {
    _bytes: Option<OwnedSemaphorePermit>,
    _review: OwnedSemaphorePermit,
}

impl Budget {
    pub fn new(limits: WebhookLimits) -> Budget {
        Budget {
            bytes: Arc::new(Semaphore::new(
                (limits.max_inflight_bytes / UNIT).clamp(1, Semaphore::MAX_PERMITS),
            )),
            reviews: Arc::new(Semaphore::new(limits.max_concurrent_reviews.max(1))),
            large_reviews: Arc::new(Semaphore::new(limits.max_concurrent_reviews.max(1))),
            limits,
        }
    }

    /// Reads a body within the byte budget and the body deadline, then waits for a review slot and
    /// checks the JSON value count. What it returns must be held until the response is built.
    pub async fn read(&self, body: Body) -> Result<(Bytes, Held), Refusal> {
        let read = self.read_body(body);
        let (bytes, bytes_held) = match tokio::time::timeout(self.limits.body_timeout, read).await {
            Ok(r) => r?,
            Err(_) => {
                return Err(refusal(
                    StatusCode::REQUEST_TIMEOUT,
                    "body_timeout",
                    format!(
                        "request body not received within {:?}",
                        self.limits.body_timeout
                    ),
                ));
            }
        };
        let values = json_values(&bytes);
        if values > self.limits.max_json_values {
            return Err(refusal(
                StatusCode::PAYLOAD_TOO_LARGE,
                "too_many_json_values",
                format!(
                    "the review holds about {values} JSON values; the limit is {}",
                    self.limits.max_json_values
                ),
            ));
        }
        let lane = if bytes.len() >= LARGE_REVIEW {
            &self.large_reviews
        } else {
            &self.reviews
        };
        let review =
            tokio::time::timeout(self.limits.review_wait, lane.clone().acquire_owned()).await;
        let Ok(Ok(review)) = review else {
            return Err(refusal(
                StatusCode::SERVICE_UNAVAILABLE,
                "busy",
                format!(
                    "{} reviews are being judged; retry",
                    self.limits.max_concurrent_reviews
                ),
            ));
        };
        // Counted as long as the review is judged, not only while it arrives.
        let held = Held {
            _bytes: bytes_held,
            _review: review,
        };
        Ok((bytes, held))
    }

    async fn read_body(
        &self,
        mut body: Body,
    ) -> Result<(Bytes, Option<OwnedSemaphorePermit>), Refusal> {
        let mut buf = Vec::new();
        let mut held: Option<OwnedSemaphorePermit> = None;
        let mut units_held = 0usize;
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|e| {
                refusal(
                    StatusCode::BAD_REQUEST,
                    "body_error",
                    format!("could not read body: {e}"),
                )
            })?;
            let Ok(data) = frame.into_data() else {
                continue;
            };
            if buf.len() + data.len() > MAX_BODY_BYTES {
                return Err(refusal(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    "body_too_large",
                    format!("could not read body (limit {MAX_BODY_BYTES} bytes)"),
                ));
            }
            buf.extend_from_slice(&data);
            let units = buf.len().div_ceil(UNIT);
            if units > units_held {
                let more = u32::try_from(units - units_held).unwrap_or(u32::MAX);
                let Ok(permit) = self.bytes.clone().try_acquire_many_owned(more) else {
                    return Err(refusal(
                        StatusCode::SERVICE_UNAVAILABLE,
                        "bytes_in_flight",
                        format!(
                            "too many request bytes in flight (limit {} bytes); retry",
                            self.limits.max_inflight_bytes
                        ),
                    ));
                };
                match held.as_mut() {
                    Some(h) => h.merge(permit),
                    None => held = Some(permit),
                }
                units_held = units;
            }
        }
        Ok((Bytes::from(buf), held))
    }
}

fn refusal(status: StatusCode, reason: &'static str, message: String) -> Refusal {
    Refusal {
        status,
        reason,
        message,
    }
}

impl WebhookMetrics {
    /// Counts a refusal by a limit (`rudder_webhook_refused{reason}`).
    pub fn refused(&self, reason: &str) {
        self.webhook_refused
            .get_or_create(&ReasonLabels {
                reason: reason.into(),
            })
            .inc();
    }
}

/// About how many JSON values `text` holds (each costs a decoded value of tens of bytes, however
/// short its text): one per structural character outside strings. Counted before decoding, so a
/// body of `[0,0,0,…]` is refused for the cost of one pass over its bytes.
pub fn json_values(text: &[u8]) -> usize {
    let mut count = 1;
    let mut in_string = false;
    let mut escaped = false;
    for &b in text {
        if in_string {
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_string = false;
            }
        } else {
            match b {
                b'"' => in_string = true,
                b',' | b'[' | b'{' | b':' => count += 1,
                _ => {}
            }
        }
    }
    count
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_values_are_counted_outside_strings_only() {
        assert_eq!(json_values(b"0"), 1);
        assert!(json_values(br#"{"a":[1,2,3],"b":"x,y:{["}"#) < 10);
        assert!(json_values(br#""\",,,,""#) <= 1);
        let bomb = "[".to_string() + &"0,".repeat(10_000) + "0]";
        assert!(json_values(bomb.as_bytes()) > 10_000);
    }

    fn body(chunks: Vec<Vec<u8>>) -> Body {
        let stream =
            futures::stream::iter(chunks.into_iter().map(Ok::<_, std::convert::Infallible>));
        Body::from_stream(stream)
    }

    #[tokio::test]
    async fn bodies_share_one_byte_budget_and_give_it_back() {
        let budget = Budget::new(WebhookLimits {
            max_inflight_bytes: 10 * UNIT,
            ..Default::default()
        });
        let (_, held) = budget.read(body(vec![vec![b' '; 6 * UNIT]])).await.unwrap();
        let refused = budget
            .read(body(vec![vec![b' '; 6 * UNIT]]))
            .await
            .err()
            .unwrap();
        assert_eq!(refused.reason, "bytes_in_flight");
        drop(held);
        assert!(budget.read(body(vec![vec![b' '; 6 * UNIT]])).await.is_ok());
    }

    #[tokio::test]
    async fn a_value_bomb_is_refused_before_decoding() {
        let budget = Budget::new(WebhookLimits {
            max_json_values: 1000,
            ..Default::default()
        });
        let bomb = ("[".to_string() + &"0,".repeat(2000) + "0]").into_bytes();
        let refused = budget.read(body(vec![bomb])).await.err().unwrap();
        assert_eq!(refused.status, StatusCode::PAYLOAD_TOO_LARGE);
    }
}
