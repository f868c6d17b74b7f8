//! A loopback TCP proxy whose open connections a test can cut, to make a client's socket drop
//! the way a network does, while new connections are still accepted.

use std::net::SocketAddr;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

pub struct CutProxy {
    addr: SocketAddr,
    cuts: watch::Sender<u64>,
    accepting: tokio::task::JoinHandle<()>,
}

impl CutProxy {
    /// Forwards every connection made to it to `target`.
    pub async fn start(target: SocketAddr) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("address");
        let cuts = watch::Sender::new(0);
        let watching = cuts.clone();
        let accepting = tokio::spawn(async move {
            while let Ok((mut client, _)) = listener.accept().await {
                let mut cut = watching.subscribe();
                tokio::spawn(async move {
                    let Ok(mut server) = TcpStream::connect(target).await else {
                        return;
                    };
                    let _ = server.set_nodelay(true);
                    let _ = client.set_nodelay(true);
                    // Dropping both streams on a cut closes them without any goodbye.
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut client, &mut server) => {}
                        _ = cut.changed() => {}
                    }
                });
            }
        });
        Self {
            addr,
            cuts,
            accepting,
        }
    }

    /// `http://127.0.0.1:<port>`
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Drops every connection open now.
    pub fn cut(&self) {
        self.cuts.send_modify(|n| *n += 1);
    }
}

impl Drop for CutProxy {
    fn drop(&mut self) {
        self.accepting.abort();
        self.cut();
    }
}
