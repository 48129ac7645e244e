//! `#[derive(DeserializeRow)]`: columns matched by name (the default) or by
//! position (`flavor = "in_order"`), with `#[shardwise(flatten)]` fields
//! reading their own columns.
//!
//! By name, the struct also implements `derived::RowByName`, and the type
//! check and the reading are that trait's generic functions; in order, it
//! implements `derived::RowInOrder`. A flattened field's type must
//! implement the trait of its parent's flavor.

use std::collections::HashSet;

use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{parse_quote, DeriveInput, GenericParam, Generics, Index, Lifetime, LifetimeParam, WhereClause};

use crate::attrs::{lit, replace_lifetimes, Field, Flavor, Input};

pub(crate) fn derive(ast: &DeriveInput) -> syn::Result<TokenStream> {
    let input = Input::parse(ast, "DeserializeRow")?;
    input.check_skip_name_checks()?;
    input.refuse(
        |f| f.allow_missing,
        "`allow_missing` applies to #[derive(DeserializeValue)] (a UDT without the field): a row \
         has the columns the query selects; select the column, or `skip` the field",
    )?;
    let krate = &input.attrs.krate;
    let de = quote!(#krate::types::de);
    let derived = quote!(#krate::types::derived);
    let name = &ast.ident;

    let (cg, impl_generics, where_clause) = Gen::new(&input);
    let (impl_generics, _, _) = impl_generics.split_for_impl();
    let (_, ty_generics, _) = ast.generics.split_for_impl();
    let lt = cg.lt.clone();

    let (type_check, deserialize, helper_trait, helper_impl) = match input.attrs.flavor {
        Flavor::ByName => (
            quote!(#derived::row_type_check_by_name::<Self>(specs)),
            quote!(#derived::row_deserialize_by_name::<Self>(row)),
            quote!(#derived::RowByName<#lt>),
            cg.by_name(),
        ),
        Flavor::InOrder => (
            quote!(#derived::row_type_check_in_order::<Self>(specs)),
            quote!(#derived::row_deserialize_in_order::<Self>(row)),
            quote!(#derived::RowInOrder<#lt>),
            cg.in_order(),
        ),
    };

    Ok(quote! {
        #[automatically_derived]
        impl #impl_generics #de::DeserializeRow<#lt> for #name #ty_generics #where_clause {
            fn type_check(
                specs: &[#krate::types::ColumnSpec],
            ) -> ::core::result::Result<(), #de::TypeCheckError> {
                #type_check
            }
            fn deserialize(
                row: #de::ColumnIterator<#lt>,
            ) -> ::core::result::Result<Self, #de::DeserializeError> {
                #deserialize
            }
        }

        #[automatically_derived]
        #[allow(unused_variables, unused_assignments, clippy::unused_unit)]
        impl #impl_generics #helper_trait for #name #ty_generics #where_clause {
            #helper_impl
        }
    })
}

/// Code generation for one struct read from a frame (a row here, a UDT
/// value in `udt_de`).
pub(crate) struct Gen<'g> {
    pub krate: TokenStream,
    pub de: TokenStream,
    /// The lifetime of the frame.
    pub lt: Lifetime,
    pub input: &'g Input<'g>,
    /// Lifetimes of the struct to replace by `lt` in the types fields are
    /// read as.
    rebind: HashSet<String>,
}

impl<'g> Gen<'g> {
    /// The generator for `input`, the generics of its impl (the struct's,
    /// with the frame's lifetime added when it is not the struct's) and
    /// the impl's where clause (bounds for the fields of generic types).
    pub fn new(input: &'g Input<'g>) -> (Self, Generics, WhereClause) {
        let ast = input.ast;
        let krate = &input.attrs.krate;
        // The lifetime of the frame the value borrows from: the struct's
        // own lifetime when it has exactly one (`struct R<'a> { s: &'a str }`),
        // else a new one. With several, the fields are read with all of them
        // replaced by the frame's (`&'f str`), which outlives each of them.
        let struct_lifetimes: Vec<&Lifetime> = ast.generics.lifetimes().map(|l| &l.lifetime).collect();
        let (lt, impl_generics, rebind): (Lifetime, Generics, HashSet<String>) = if let [only] = struct_lifetimes[..] {
            (only.clone(), ast.generics.clone(), HashSet::new())
        } else {
            let lt = Lifetime::new("'__shardwise_frame", Span::call_site());
            let param: LifetimeParam = if struct_lifetimes.is_empty() {
                LifetimeParam::new(lt.clone())
            } else {
                parse_quote!(#lt: #(#struct_lifetimes)+*)
            };
            let mut g = ast.generics.clone();
            g.params.insert(0, GenericParam::Lifetime(param));
            let rebind = struct_lifetimes.iter().map(|l| l.ident.to_string()).collect();
            (lt, g, rebind)
        };
        let de = quote!(#krate::types::de);
        let cg = Gen { krate: quote!(#krate), de: de.clone(), lt: lt.clone(), input, rebind };
        let (_, _, where_clause) = ast.generics.split_for_impl();
        let mut where_clause: WhereClause = where_clause.cloned().unwrap_or_else(|| parse_quote!(where));
        let derived = quote!(#krate::types::derived);
        for f in input.fields.iter().filter(|f| input.is_generic(&f.ty)) {
            let ty = &f.ty;
            where_clause.predicates.push(if f.skip {
                parse_quote!(#ty: ::core::default::Default)
            } else if f.flatten.is_some() {
                let ty = cg.frame_ty(f);
                match input.attrs.flavor {
                    Flavor::ByName => parse_quote!(#ty: #derived::RowByName<#lt>),
                    Flavor::InOrder => parse_quote!(#ty: #derived::RowInOrder<#lt>),
                }
            } else if f.default_when_null.is_some() || f.allow_missing.is_some() {
                let ty = cg.frame_ty(f);
                parse_quote!(#ty: #de::DeserializeValue<#lt> + ::core::default::Default)
            } else {
                let ty = cg.frame_ty(f);
                parse_quote!(#ty: #de::DeserializeValue<#lt>)
            });
        }
        (cg, impl_generics, where_clause)
    }

    pub fn active(&self) -> Vec<&Field> {
        self.input.active().collect()
    }

    /// The type field `f` is read as: its own, with the lifetimes of
    /// `rebind` replaced by the frame's.
    pub fn frame_ty(&self, f: &Field) -> TokenStream {
        let ty = &f.ty;
        if self.rebind.is_empty() {
            quote!(#ty)
        } else {
            replace_lifetimes(quote!(#ty), &self.rebind, &self.lt)
        }
    }

    /// `<T as DeserializeValue<'lt>>`, spanned at the field's type so that
    /// a missing impl is reported there.
    pub fn value_trait(&self, f: &Field) -> TokenStream {
        let (de, lt) = (&self.de, &self.lt);
        let ty = self.frame_ty(f);
        quote_spanned!(f.ty.span()=> <#ty as #de::DeserializeValue<#lt>>)
    }

    /// `Ok(Self { .. })` from one local per active field, in field order.
    pub fn construct(&self) -> TokenStream {
        let mut active = 0usize;
        let inits = self.input.fields.iter().map(|f| {
            let (ident, ty) = (&f.ident, &f.ty);
            if f.skip {
                quote_spanned!(ty.span()=> #ident: <#ty as ::core::default::Default>::default())
            } else {
                let var = format_ident!("__f{}", active);
                active += 1;
                quote!(#ident: #var)
            }
        });
        quote!(::core::result::Result::Ok(Self { #(#inits),* }))
    }

    /// `<T as DeserializeValue<'lt>>::deserialize(typ, value)` for field
    /// `f`, with a null read as `Default::default()` for
    /// `default_when_null`.
    pub fn read_value(&self, f: &Field, typ: TokenStream, value: TokenStream) -> TokenStream {
        let (de, lt) = (&self.de, &self.lt);
        if f.default_when_null.is_some() {
            let ty = self.frame_ty(f);
            quote_spanned! {f.ty.span()=>
                <::core::option::Option<#ty> as #de::DeserializeValue<#lt>>::deserialize(#typ, #value)
                    .map(::core::option::Option::unwrap_or_default)
            }
        } else {
            let value_trait = self.value_trait(f);
            quote!(#value_trait::deserialize(#typ, #value))
        }
    }

    /// `<F as RowByName<'lt>>` (or `RowInOrder`) of a flattened field.
    fn flat_trait(&self, f: &Field) -> TokenStream {
        let (krate, lt) = (&self.krate, &self.lt);
        let ty = self.frame_ty(f);
        match self.input.attrs.flavor {
            Flavor::ByName => quote_spanned!(f.ty.span()=> <#ty as #krate::types::derived::RowByName<#lt>>),
            Flavor::InOrder => quote_spanned!(f.ty.span()=> <#ty as #krate::types::derived::RowInOrder<#lt>>),
        }
    }

    /// The body of `derived::RowByName`: each column is read by the field
    /// of its name, or by a flattened field's type.
    fn by_name(&self) -> TokenStream {
        let (krate, de, lt) = (&self.krate, &self.de, &self.lt);
        let derived = quote!(#krate::types::derived);
        let active = self.active();
        let vars: Vec<_> = (0..active.len()).map(|i| format_ident!("__f{}", i)).collect();
        let own: Vec<_> = active.iter().zip(&vars).filter(|(f, _)| f.flatten.is_none()).collect();
        let flat: Vec<_> = active.iter().zip(&vars).filter(|(f, _)| f.flatten.is_some()).collect();
        let n = own.len();
        let names: Vec<_> = own.iter().map(|(f, _)| lit(&f.name)).collect();
        let indexes: Vec<_> = (0..n).collect();
        let own_slots: Vec<Index> = (0..n).map(Index::from).collect();
        let flat_slots: Vec<Index> = (n..n + flat.len()).map(Index::from).collect();
        let flat_seen: Vec<Index> = (1..=flat.len()).map(Index::from).collect();
        let flat_traits: Vec<_> = flat.iter().map(|(f, _)| self.flat_trait(f)).collect();
        let own_types: Vec<_> = own.iter().map(|(f, _)| self.frame_ty(f)).collect();

        let mark_flat = quote! {
            #(
                let __m = #flat_traits::mark(name, &mut seen.#flat_seen);
                if __m != #derived::NameMatch::NotMine {
                    return __m;
                }
            )*
            #derived::NameMatch::NotMine
        };
        let mark = if n == 0 {
            mark_flat
        } else {
            quote! {
                let __i: usize = match name {
                    #(#names => #indexes,)*
                    _ => return { #mark_flat },
                };
                #derived::mark_seen(&mut seen.0, __i)
            }
        };
        let checks = own.iter().map(|(f, _)| {
            let (name, value) = (lit(&f.name), self.value_trait(f));
            quote! {
                #name => {
                    #value::type_check(&spec.typ)?;
                    ::core::result::Result::Ok(true)
                }
            }
        });
        let reads = own.iter().zip(&own_slots).map(|((f, _), slot)| {
            let name = lit(&f.name);
            let read = self.read_value(f, quote!(&column.spec.typ), quote!(column.value));
            quote! {
                #name => {
                    partial.#slot = ::core::option::Option::Some(#read?);
                    ::core::result::Result::Ok(true)
                }
            }
        });
        let own_vars: Vec<_> = own.iter().map(|(_, v)| *v).collect();
        let flat_vars: Vec<_> = flat.iter().map(|(_, v)| *v).collect();
        let takes = own.iter().map(|(f, var)| {
            let name = lit(&f.name);
            quote! {
                let ::core::option::Option::Some(#var) = #var else {
                    return ::core::result::Result::Err(#name);
                };
            }
        });
        let construct = self.construct();
        let destructure = if active.is_empty() {
            quote!(let _ = partial;)
        } else {
            quote!(let (#(#own_vars,)* #(#flat_vars,)*) = partial;)
        };
        quote! {
            type Seen = ([bool; #n], #(#flat_traits::Seen,)*);
            type Partial = (#(::core::option::Option<#own_types>,)* #(#flat_traits::Partial,)*);
            fn new_seen() -> Self::Seen {
                ([false; #n], #(#flat_traits::new_seen(),)*)
            }
            fn new_partial() -> Self::Partial {
                (#(::core::option::Option::<#own_types>::None,)* #(#flat_traits::new_partial(),)*)
            }
            fn mark(name: &str, seen: &mut Self::Seen) -> #derived::NameMatch {
                #mark
            }
            fn check_named(
                spec: &#krate::types::ColumnSpec,
            ) -> ::core::result::Result<bool, #de::TypeCheckError> {
                match spec.name.as_str() {
                    #(#checks)*
                    _ => {
                        #(
                            if #flat_traits::check_named(spec)? {
                                return ::core::result::Result::Ok(true);
                            }
                        )*
                        ::core::result::Result::Ok(false)
                    }
                }
            }
            fn unseen(seen: &Self::Seen) -> ::core::option::Option<&'static str> {
                const __NAMES: [&str; #n] = [#(#names),*];
                for (__name, __found) in __NAMES.iter().zip(seen.0.iter()) {
                    if !*__found {
                        return ::core::option::Option::Some(__name);
                    }
                }
                #(
                    if let ::core::option::Option::Some(__name) = #flat_traits::unseen(&seen.#flat_seen) {
                        return ::core::option::Option::Some(__name);
                    }
                )*
                ::core::option::Option::None
            }
            fn read_named(
                column: &#de::RawColumn<#lt>,
                partial: &mut Self::Partial,
            ) -> ::core::result::Result<bool, #de::DeserializeError> {
                match column.spec.name.as_str() {
                    #(#reads)*
                    _ => {
                        #(
                            if #flat_traits::read_named(column, &mut partial.#flat_slots)? {
                                return ::core::result::Result::Ok(true);
                            }
                        )*
                        ::core::result::Result::Ok(false)
                    }
                }
            }
            fn finish(partial: Self::Partial) -> ::core::result::Result<Self, &'static str> {
                #destructure
                #(#takes)*
                #(let #flat_vars = #flat_traits::finish(#flat_vars)?;)*
                #construct
            }
        }
    }

    /// The body of `derived::RowInOrder`: column `i` is field `i`, a
    /// flattened field reading as many columns as its type does.
    fn in_order(&self) -> TokenStream {
        let (krate, de, lt) = (&self.krate, &self.de, &self.lt);
        let derived = quote!(#krate::types::derived);
        let active = self.active();
        let own = active.iter().filter(|f| f.flatten.is_none()).count();
        let flat_counts = active.iter().filter(|f| f.flatten.is_some()).map(|f| {
            let tr = self.flat_trait(f);
            quote!(+ #tr::column_count())
        });
        let checks = active.iter().map(|f| {
            if f.flatten.is_some() {
                let tr = self.flat_trait(f);
                quote! {
                    let __n = #tr::column_count();
                    #tr::check_in_order(#derived::columns_at::<Self>(specs, __at, __n)?)?;
                    __at = __at.saturating_add(__n);
                }
            } else {
                let value = self.value_trait(f);
                quote! {
                    for __spec in #derived::columns_at::<Self>(specs, __at, 1)? {
                        #value::type_check(&__spec.typ).map_err(|e| #derived::in_column(e, __spec))?;
                    }
                    __at = __at.saturating_add(1);
                }
            }
        });
        let reads = active.iter().enumerate().map(|(i, f)| {
            let var = format_ident!("__f{}", i);
            if f.flatten.is_some() {
                let tr = self.flat_trait(f);
                quote!(let #var = #tr::read_in_order(row)?;)
            } else {
                let read = self.read_value(f, quote!(&__col.spec.typ), quote!(__col.value));
                quote! {
                    let __col = #derived::next_column(row)?;
                    let #var = #read.map_err(|e| #derived::in_raw_column(&__col, e))?;
                }
            }
        });
        let at = if active.is_empty() { quote!(let _ = specs;) } else { quote!(let mut __at = 0usize;) };
        let construct = self.construct();
        quote! {
            fn column_count() -> usize {
                #own #(#flat_counts)*
            }
            fn check_in_order(
                specs: &[#krate::types::ColumnSpec],
            ) -> ::core::result::Result<(), #de::TypeCheckError> {
                #at
                #(#checks)*
                ::core::result::Result::Ok(())
            }
            fn read_in_order(
                row: &mut #de::ColumnIterator<#lt>,
            ) -> ::core::result::Result<Self, #de::DeserializeError> {
                #(#reads)*
                #construct
            }
        }
    }
}
