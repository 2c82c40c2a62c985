//! The forwarding half of the object-store tests' wrapper stores: each test store changes
//! what a few calls do (records them, drops an answer, holds a read) and hands every other
//! call to the store it wraps, its `inner` field.

/// `impl ObjectStore for $store`: the methods given, then `put_multipart_opts`,
/// `delete_stream`, `list`, `list_with_delimiter` and `copy_opts` handed to `self.inner`;
/// and its `Display`, `$store(inner)`.
macro_rules! forwarding_object_store {
    ($store:ident { $($given:tt)* }) => {
        impl std::fmt::Display for $store {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(f, "{}({})", stringify!($store), self.inner)
            }
        }

        #[async_trait::async_trait]
        impl object_store::ObjectStore for $store {
            $($given)*

            async fn put_multipart_opts(
                &self,
                location: &object_store::path::Path,
                opts: object_store::PutMultipartOptions,
            ) -> object_store::Result<Box<dyn object_store::MultipartUpload>> {
                {
                    #[allow(unused_imports)]
                    use object_store::ObjectStore as _;
                    self.inner.put_multipart_opts(location, opts).await
                }
            }

            fn delete_stream(
                &self,
                locations: futures::stream::BoxStream<
                    'static,
                    object_store::Result<object_store::path::Path>,
                >,
            ) -> futures::stream::BoxStream<'static, object_store::Result<object_store::path::Path>>
            {
                {
                    #[allow(unused_imports)]
                    use object_store::ObjectStore as _;
                    self.inner.delete_stream(locations)
                }
            }

            fn list(
                &self,
                prefix: Option<&object_store::path::Path>,
            ) -> futures::stream::BoxStream<'static, object_store::Result<object_store::ObjectMeta>>
            {
                {
                    #[allow(unused_imports)]
                    use object_store::ObjectStore as _;
                    self.inner.list(prefix)
                }
            }

            async fn list_with_delimiter(
                &self,
                prefix: Option<&object_store::path::Path>,
            ) -> object_store::Result<object_store::ListResult> {
                {
                    #[allow(unused_imports)]
                    use object_store::ObjectStore as _;
                    self.inner.list_with_delimiter(prefix).await
                }
            }

            async fn copy_opts(
                &self,
                from: &object_store::path::Path,
                to: &object_store::path::Path,
                options: object_store::CopyOptions,
            ) -> object_store::Result<()> {
                {
                    #[allow(unused_imports)]
                    use object_store::ObjectStore as _;
                    self.inner.copy_opts(from, to, options).await
                }
            }
        }
    };
}
